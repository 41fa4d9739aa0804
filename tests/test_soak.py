"""Soak: a mixed scripted + LLM (loopback test server) population over hundreds of rounds with
faults injected at 20 % of calls and SIGKILLs at random points; every run completes, the ledger
and schedule invariants hold, and a killed-then-resumed run equals the uninterrupted one."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
import yaml
from helpers import check_invariants, check_ledger, run

from mbb.batch.build import load_params
from mbb.batch.resume import resume_run
from mbb.core.eventlog import KILL_ENV, comparable, read_lines
from mbb.testing.testserver import FakeOpenAIServer, Reply, schema_responder

SECRET = "sk-soak-NEVER-WRITTEN-0123456789abcdef"
KEY_ENV = "MBB_SOAK_KEY"


class Faulty:
    """20 % of requests fail on their first and second attempt (429, 500, malformed body or a
    dropped connection, chosen by the request's hash, so re-executions see the same faults);
    the third attempt always succeeds, within the client's retry budget."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}
        self.faults = 0

    def __call__(self, body: dict) -> Reply:
        key = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()
        n = self.seen[key] = self.seen.get(key, 0) + 1
        h = int(key[:8], 16)
        if h % 5 == 0 and n <= 2:
            self.faults += 1
            return [
                Reply.error(429, retry_after=0),
                Reply.error(500),
                Reply.malformed(),
                Reply.dropped(),
            ][(h // 5 + n) % 4]
        return schema_responder(body)


def soak_params(root, server, cache, **extra) -> dict:
    model = {
        "model": "soak-model",
        "base_url": server.url,
        "api_key_env": KEY_ENV,
        "structured": "json_object_schema",
        "timeout_s": 5.0,
        "max_retries": 3,
        "concurrency": 4,
    }
    params = {
        "extends": str(root / "params" / "base.yaml"),
        "name": "soak",
        "subruns": 6,
        "deadline": {"minutes": 20},
        "workers": {
            "count": 6,
            "personas": [
                "price_first",
                "reciprocator",
                "rule_maker",
                "quitter",
                "coalition_builder",
                "deadline_advocate",
            ],
            "overrides": {w: {"negotiator": "llm", "model": "soak"} for w in ("W2", "W4", "W6")},
        },
        "models": {"soak": model},
        "llm": {"cache": "read_write", "cache_file": str(cache)},
    }
    params.update(extra)
    return params


def same_run(line: str) -> str:
    """`comparable`, also ignoring which cache file the run used (each kill gets its own)."""
    if line.startswith('{"kind":"run_started"'):
        d = json.loads(comparable(line))
        d["params"].pop("llm")
        return json.dumps(d, sort_keys=True)
    return comparable(line)


def as_condition(root, params: dict):
    over = {k: v for k, v in params.items() if k != "extends"}
    return load_params(root / "params" / "base.yaml", over)


@pytest.fixture
def server():
    faulty = Faulty()
    with FakeOpenAIServer(faulty, api_key=SECRET, models=("soak-model",)) as srv:
        srv.faulty = faulty
        yield srv


@pytest.mark.slow
def test_soak_with_faults_and_kills(root, tmp_path, server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    # --- long runs with faults: every run completes, invariants hold
    rounds = 0
    for seed in range(5):
        cond = as_condition(root, soak_params(root, server, tmp_path / f"c{seed}.sqlite"))
        r = run(cond, seed)
        check_invariants(r, cond)
        check_ledger(r, cond)
        rounds += sum(e["kind"] == "round_started" for e in r.events)
    assert rounds >= 100
    assert server.faulty.faults >= 0.1 * len(server.completions)  # ~20 % of requests faulted

    # --- random kills of a mixed run, then resume: same events as uninterrupted
    params = soak_params(root, server, tmp_path / "ref.sqlite", subruns=2)
    ref_cond = as_condition(root, params)
    reference = [same_run(x) for x in run(ref_cond, 7).lines]
    n = len(reference)
    for i, kill_after in enumerate(sorted({n // 9, n // 4, n // 2, 2 * n // 3, n - 3})):
        cache = tmp_path / f"kill{i}.sqlite"
        pfile = tmp_path / f"kill{i}.yaml"
        pfile.write_text(
            yaml.safe_dump({**params, "llm": {"cache": "read_write", "cache_file": str(cache)}})
        )
        out = tmp_path / f"k{i}"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "mbb",
                "run",
                str(pfile),
                "--seed",
                "7",
                "--out",
                str(out),
                "--quiet",
                "--processes",
                "1",
            ],
            env={**os.environ, KILL_ENV: str(kill_after)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == -9, proc.stderr[-2000:]
        run_dir = (
            out / "soak-soak-seed0007"
        )  # <condition>-<model>-seed: LLM workers (mbb.batch.runs)
        assert len(read_lines(run_dir / "events.jsonl")) == kill_after
        resume_run(run_dir, load_params(pfile))
        after = read_lines(run_dir / "events.jsonl")
        assert [same_run(x) for x in after] == reference, f"kill after {kill_after}"
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []

"""Crash-safe resume: SIGKILL a run at many points, resume it, get the uninterrupted events."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mbb.batch.build import load_params, run_condition
from mbb.batch.resume import resume_run
from mbb.core.eventlog import KILL_ENV, ResumeMismatch, comparable, read_lines

OVERRIDES = {"subruns": 2, "name": "kill"}


def _condition(root):
    return load_params(root / "params" / "base.yaml", OVERRIDES)


def _reference(root):
    cond = _condition(root)
    return [comparable(x) for x in run_condition(cond, 3).log.lines]


def _killed_run(root, out, kill_after):
    cmd = [
        sys.executable,
        "-m",
        "mbb",
        "run",
        str(root / "params" / "base.yaml"),
        "--seed",
        "3",
        "--out",
        str(out),
        "--quiet",
        "--processes",
        "1",
        "--set",
        "subruns=2",
        "--set",
        "name=kill",
    ]
    env = {**os.environ, KILL_ENV: str(kill_after)}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr  # killed by SIGKILL, not a clean exit
    return out / "kill-seed0003"


@pytest.mark.slow
def test_sigkill_at_twenty_points_then_resume_equals_uninterrupted(root, tmp_path):
    reference = _reference(root)
    n = len(reference)
    points = sorted({max(1, round(n * k / 21)) for k in range(1, 21)} | {1})
    assert len(points) >= 20
    for i, kill_after in enumerate(points):
        run_dir = _killed_run(root, tmp_path / f"k{i}", kill_after)
        before = read_lines(run_dir / "events.jsonl")
        assert len(before) == kill_after
        if i % 5 == 0:  # a torn write: half a line at the end of the file
            with (run_dir / "events.jsonl").open("a") as fh:
                fh.write(reference[kill_after][:40])
        out = resume_run(run_dir, _condition(root))
        assert out.status == "resumed" and out.recorded == kill_after
        after = read_lines(run_dir / "events.jsonl")
        assert [comparable(x) for x in after] == reference, f"kill after {kill_after}"
        assert [json.loads(x)["seq"] for x in after] == list(range(n))  # none lost or repeated
        assert after[:kill_after] == before  # recorded lines kept byte for byte
        assert (run_dir / "meta.json").is_file()


def test_finished_run_is_left_alone(root, tmp_path):
    cond = load_params(root / "params" / "base.yaml", OVERRIDES)
    result = run_condition(cond, 1, tmp_path)
    text = (result.out_dir / "events.jsonl").read_text()
    out = resume_run(result.out_dir, cond)
    assert out.status == "finished"
    assert (result.out_dir / "events.jsonl").read_text() == text


def test_resume_detects_a_log_from_another_run(root, tmp_path):
    cond = load_params(root / "params" / "base.yaml", OVERRIDES)
    result = run_condition(cond, 1, tmp_path)
    path = result.out_dir / "events.jsonl"
    lines = read_lines(path)
    doctored = lines[:30]
    d = json.loads(doctored[-1])
    d["t"] = d["t"] + 1.0
    doctored[-1] = json.dumps(d, separators=(",", ":"))
    path.write_text("".join(x + "\n" for x in doctored))
    with pytest.raises(ResumeMismatch, match="event 29 differs") as err:
        resume_run(result.out_dir, cond)
    # the difference is named, and the message is the first difference's, not that of the
    # run's own failure event written after it (a red team's resume said only that)
    assert "fields that differ: t)" in str(err.value)
    assert '"kind":"run_ended"' not in str(err.value)


def test_resume_errors_are_clear(root, tmp_path):
    cond = _condition(root)
    with pytest.raises(FileNotFoundError, match=r"no events\.jsonl"):
        resume_run(tmp_path, cond)
    (tmp_path / "events.jsonl").write_text('{"kind":"run_st')
    with pytest.raises(ValueError, match="no complete event"):
        resume_run(tmp_path, cond)


def test_a_re_made_call_served_from_a_warm_prompt_cache_is_the_same_call():
    """A red team resumed a study whose LLM cache was gone: the calls were made again, the
    server's prompt cache was warm by then, and the resume stopped on `cached_tokens` and
    `cost_usd`: how an answer was obtained, not what it was. Its tokens still count."""
    base = {
        "kind": "llm_call",
        "v": 1,
        "run_id": "r",
        "seq": 5,
        "t": 0.0,
        "subrun": 1,
        "round": 1,
        "worker": "W1",
        "wall": 1.0,
        "prompt_tokens": 1800,
        "completion_tokens": 21,
        "cached_tokens": 0,
        "cost_usd": 0.002,
    }
    warm = {**base, "wall": 2.0, "cached_tokens": 1536, "cost_usd": 0.0008}
    assert comparable(_line(base)) == comparable(_line(warm))
    other = {**base, "completion_tokens": 22}
    assert comparable(_line(base)) != comparable(_line(other))
    # a log written before mbb recorded the served model resumes under this mbb: null is absent
    assert comparable(_line(base)) == comparable(_line({**base, "served_model": None}))
    routed = {**base, "served_model": "another-model"}
    assert comparable(_line(base)) != comparable(_line(routed))
    # nor the flag for token counts that cannot be true: false is absent, true is not
    assert comparable(_line(base)) == comparable(_line({**base, "usage_implausible": False}))
    assert comparable(_line(base)) != comparable(_line({**base, "usage_implausible": True}))


def _line(event: dict) -> str:
    return json.dumps(event, separators=(",", ":"))  # the writer's form

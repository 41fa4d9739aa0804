"""Whole conditions with LLM negotiators through the arena, against the loopback test server
and the real `openai` client: a full run, mixed models, faults, replay, and no leaked key."""

from __future__ import annotations

import json
import os

import polars as pl
import pytest

from mbb.batch.build import load_params, run_condition
from mbb.batch.runner import run_many
from mbb.core.tables import tables_from_log
from mbb.testing.testserver import FakeOpenAIServer, Reply, schema_responder

from .conftest import KEY_ENV, SECRET, replay_comparable


@pytest.fixture
def key_in_env(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


@pytest.fixture
def llm_server():
    with FakeOpenAIServer(schema_responder, api_key=SECRET, models=("m-a", "m-b")) as srv:
        yield srv


def condition(root, server, tmp_path, **extra):
    model = {
        "base_url": server.url,
        "api_key_env": KEY_ENV,
        "timeout_s": 5.0,
        "max_retries": 3,
        "structured": "json_object_schema",
        "concurrency": 5,
    }
    over = {
        "name": "llm_test",
        "subruns": 2,
        "workers": {"negotiator": "llm", "model": "a"},
        "models": {
            "a": {**model, "model": "m-a"},
            "b": {**model, "model": "m-b", "structured": "json_schema"},
        },
        "prices": {"m-a": {"prompt": 1.0, "completion": 2.0}},
        "llm": {"cache": "read_write", "cache_file": str(tmp_path / "cache.sqlite")},
    }
    for k, v in extra.items():
        over[k] = v
    return load_params(root / "params" / "llm_negotiators.yaml", over)


def test_full_condition_with_llm_negotiators(root, tmp_path, llm_server, key_in_env):
    llm_server.delay_s = 0.01  # so that gathered requests visibly overlap even on a busy host
    cond = condition(root, llm_server, tmp_path)
    result = run_condition(cond, 0, tmp_path / "out")
    t = tables_from_log(result.log)
    assert t["evaluations"].height == 5 * 2
    calls = t["llm_calls"]
    assert calls.height == len(llm_server.completions) > 0
    assert set(calls["role"]) >= {"negotiator", "report", "summary"}
    assert set(calls["phase"]) >= {"declaration", "conversation", "ballot"}
    assert (calls["prompt_tokens"] > 0).all() and (calls["cost_usd"] > 0).all()
    assert t["declarations"].height > 0 and t["ballots"].height > 0
    assert json.loads(result.log.lines[-1])["status"] == "completed"
    # concurrency within a phase: the server saw overlapping requests
    assert llm_server.max_in_flight > 1


def test_replay_makes_no_requests_and_reproduces_the_events(root, tmp_path, llm_server, key_in_env):
    live = run_condition(condition(root, llm_server, tmp_path), 1, tmp_path / "live")
    n_live = len(llm_server.completions)
    replay_cond = condition(
        root,
        llm_server,
        tmp_path,
        llm={"cache": "replay", "cache_file": str(tmp_path / "cache.sqlite")},
    )
    os.environ.pop(KEY_ENV)  # replay needs no key
    again = run_condition(replay_cond, 1, tmp_path / "replay")
    assert len(llm_server.completions) == n_live  # zero new requests

    assert replay_comparable(again.log.lines) == replay_comparable(live.log.lines)
    hits = tables_from_log(again.log)["llm_calls"]["cache_hit"]
    assert hits.all()


def test_mixed_models_in_one_population(root, tmp_path, llm_server, key_in_env):
    cond = condition(
        root,
        llm_server,
        tmp_path,
        subruns=1,
        workers={
            "negotiator": "llm",
            "model": "a",
            "overrides": {"W2": {"model": "b"}, "W3": {"negotiator": "scripted"}},
        },
    )
    t = tables_from_log(run_condition(cond, 2, tmp_path / "o").log)
    by_model = dict(t["llm_calls"].group_by("worker").agg(pl.col("model").first()).iter_rows())
    assert by_model["W1"] == "m-a" and by_model["W2"] == "m-b"
    assert "W3" not in by_model  # scripted
    assert {r.body["model"] for r in llm_server.completions} == {"m-a", "m-b"}


def test_faults_are_handled_and_recorded_and_the_run_completes(root, tmp_path, key_in_env):
    n = {"i": 0}

    def flaky(body):
        n["i"] += 1
        k = n["i"] % 5
        if k == 0:
            return Reply.error(429, retry_after=0)
        if k == 1:
            return Reply.error(500)
        if k == 2:
            return Reply.malformed()
        return schema_responder(body)

    with FakeOpenAIServer(flaky, api_key=SECRET, models=("m-a", "m-b")) as srv:
        cond = condition(root, srv, tmp_path, subruns=1)
        result = run_condition(cond, 3, tmp_path / "o")
    t = tables_from_log(result.log)
    assert json.loads(result.log.lines[-1])["status"] == "completed"
    assert (t["llm_calls"]["attempts"] > 1).any()  # retried
    assert t["evaluations"].height == 5


def test_the_api_key_is_never_written(root, tmp_path, llm_server, key_in_env):
    cond = condition(root, llm_server, tmp_path, subruns=1)
    out = tmp_path / "runs"
    run_many(cond, runs=2, out_dir=out, processes=1).check()
    # the server did receive the key (so it was used), yet no output file contains it
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in llm_server.completions)
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []


def test_seeds_share_one_event_loop_and_one_rate_limit(root, tmp_path, key_in_env):
    """Three 2-worker runs through `run_many`: their calls overlap across runs (one event loop),
    never beyond the endpoint's limit of 3 (one rate limit), and each run's events are exactly
    those of the same seed run alone."""
    with FakeOpenAIServer(schema_responder, api_key=SECRET, models=("m-a",), delay_s=0.05) as srv:
        over = {"subruns": 1, "workers": {"count": 2, "negotiator": "llm", "model": "a"}}
        cond = condition(root, srv, tmp_path, **over)
        cond = cond.model_copy(
            update={"models": {"a": cond.models["a"].model_copy(update={"concurrency": 3})}}
        )
        batch = run_many(cond, runs=3, out_dir=tmp_path / "batch").check()
        assert srv.max_in_flight == 3  # a single 2-worker run never has more than 2 in flight
        alone = run_condition(cond, cond.seed + 1, tmp_path / "alone")
    together = (tmp_path / "batch" / alone.run_id / "events.jsonl").read_text().splitlines()
    assert len(batch.run_ids) == 3
    assert replay_comparable(together) == replay_comparable(alone.log.lines)


def test_each_workers_prompts_extend_one_conversation_per_subrun(root, tmp_path, key_in_env):
    """Prefix reuse by construction: within a subrun, every request of a worker repeats its
    previous request exactly (system prompt, earlier turns, answers as sent) and appends to it,
    unless the conversation was restarted (a new subrun, or compacted: two messages again)."""

    def staying(body: dict) -> Reply:
        """schema_responder, but never withdrawing: its random answers are seeded by the
        prompt's text, and a worker that withdraws early leaves too few turns to count."""
        reply = schema_responder(body)
        message = reply.body["choices"][0]["message"] if isinstance(reply.body, dict) else {}
        answer = json.loads(message["content"]) if message.get("content") else None
        if isinstance(answer, dict) and answer.get("action") == "withdraw":
            return Reply.completion(json.dumps({**answer, "action": "declare"}))
        return reply

    with FakeOpenAIServer(staying, api_key=SECRET, models=("m-a", "m-b")) as srv:
        cond = condition(root, srv, tmp_path, subruns=2, llm={"cache": "off"})
        run_condition(cond, 4, None)
        bodies = [r.body for r in srv.completions]
    last: dict[str, list] = {}
    extended = restarted = 0
    for body in bodies:
        msgs = body["messages"]
        worker = msgs[0]["content"].rsplit("You are worker ", 1)[1].split(":", 1)[0]
        prev = last.get(worker)
        if prev is not None and msgs[: len(prev)] == prev:
            extended += 1
        else:
            assert len(msgs) == 2, "a conversation is only ever restarted from the beginning"
            restarted += 1
        last[worker] = msgs
    assert extended > 4 * restarted


def test_progress_advances_per_llm_call(root, tmp_path, key_in_env, monkeypatch):
    """`mbb run` of an LLM condition: the bar counts every call as it ends (a run can take
    minutes), and its description counts the runs that have finished."""
    from mbb.batch import runner

    seen: list[tuple[int, int]] = []  # (calls, runs done) after each update
    real_call, real_runs = runner._Progress.call, runner._Progress.runs

    def call(self, *a):
        real_call(self, *a)
        seen.append((self.calls, self.done))

    def runs(self, n):
        real_runs(self, n)
        seen.append((self.calls, self.done))

    monkeypatch.setattr(runner._Progress, "call", call)
    monkeypatch.setattr(runner._Progress, "runs", runs)
    with FakeOpenAIServer(schema_responder, api_key=SECRET, models=("m-a",)) as srv:
        over = {"subruns": 1, "workers": {"count": 2, "negotiator": "llm", "model": "a"}}
        cond = condition(root, srv, tmp_path, **over)
        batch = run_many(cond, runs=2, out_dir=tmp_path / "b", progress=True).check()
        n_calls = len(srv.completions)
    assert batch.by_kind["llm_call"] and n_calls == len(batch.by_kind["llm_call"])
    calls = [c for c, _ in seen]
    assert calls[-1] == n_calls and sorted(calls) == calls
    assert set(range(1, n_calls + 1)) <= set(calls)  # one step per call
    first_run_done = next(i for i, (_, d) in enumerate(seen) if d == 1)
    assert seen[first_run_done][0] > 0  # the bar moved before any run had ended
    assert seen[-1][1] == 2


def test_modeled_solvers_of_llm_negotiators_request_estimates(
    root, tmp_path, llm_server, key_in_env
):
    """F-1 (mbb's choice): a modeled solver whose negotiator is a language model requests its
    own estimate, and the run records so per worker; a mechanism replay keeps the rule."""
    from mbb.agents.modeled import ESTIMATE_LOG_SD
    from mbb.analysis.mechanisms.replay import replay

    result = run_condition(condition(root, llm_server, tmp_path, subruns=1), 5, tmp_path / "o")
    start = json.loads(result.log.lines[0])
    assert [w["solver_settings"]["estimate_log_sd"] for w in start["workers"]] == [
        ESTIMATE_LOG_SD
    ] * len(start["workers"])
    again = replay(result.log.lines, "fcfs")
    replayed = json.loads(again.log.lines[0])
    assert {w["negotiator"] for w in replayed["workers"]} == {"scripted"}
    assert {w["solver_settings"]["estimate_log_sd"] for w in replayed["workers"]} == {
        ESTIMATE_LOG_SD
    }

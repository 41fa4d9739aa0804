"""The LLM solver under the paper's clock (`time.model: charged`) and with completion decided by
the hidden tests, through the loopback server. Latencies come from a fake clock that the
scripted server advances by a known amount per reply, so window time is exact."""

from __future__ import annotations

import asyncio
import json

import pytest

from mbb.batch.build import load_params, run_condition_async
from mbb.core.tables import tables_from_log
from mbb.llm.cache import LlmCache
from mbb.tasks.suite import build_suite
from mbb.testing.testserver import FakeOpenAIServer

from .conftest import KEY_ENV, SECRET, FakeClock, make_client
from .solver_model import SolverScript
from .test_llm_solver import Rig

THINK_S = 2.5  # every scripted reply takes this long on the fake clock


@pytest.fixture(scope="module")
def suite():
    return build_suite(tasks=["rev", "tac", "head"])


def _work_calls(rig: Rig) -> list[dict]:
    return [c for c in rig.events("llm_call") if c["phase"] == "work"]


# --- completion by the hidden tests -----------------------------------------------------------
def test_a_claim_the_hidden_tests_reject_is_not_completion(tmp_path, suite):
    script = SolverScript(memory_first=False, claim_early=True, idle_reads=True)
    with FakeOpenAIServer(script, api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv, loop={"max_turns_per_window": 3})
        rig.start("rev")
        out = rig.window(rig.ask().duration)
        assert not out.completed and not rig.solver.done and rig.solver.progress < 1.0
        (claim,) = [e for e in rig.events("invalid_action") if e["rule"] == "not_completed"]
        assert claim["field"] == "release.finished" and claim["phase"] == "solver_work"
        assert claim["detail"].startswith("declared finished, but 0 of ")
        # the model is told, and its window went on: the two reads after the claim ran
        said = json.dumps(script.seen[-1]["messages"])
        assert "not completed: the hidden tests do not all pass yet" in said
        assert [c["tool"] for c in rig.events("command")] == ["read", "read"]
        assert not rig.run(rig.solver.evaluate()).resolved


def test_after_a_rejected_claim_the_solver_works_on_and_completes(tmp_path, suite):
    script = SolverScript(memory_first=False, claim_early=True)
    with FakeOpenAIServer(script, api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv)
        rig.start("rev")
        out = rig.window(rig.ask().duration)
        assert out.completed and rig.solver.done and rig.solver.windows == 1
        rules = [e["rule"] for e in rig.events("invalid_action")]
        assert rules == ["not_completed"]  # the first claim; the second one passed
        assert rig.run(rig.solver.evaluate()).resolved


# --- the paper's clock ------------------------------------------------------------------------
@pytest.mark.parametrize("time_model", ["charged", "virtual"])
def test_model_latency_consumes_the_window_only_when_charged(tmp_path, suite, time_model):
    clock = FakeClock()
    script = SolverScript(memory_first=False)
    with FakeOpenAIServer(clock.answering(THINK_S, script), api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv, time_model=time_model, clock=clock)
        rig.start("rev")
        req = rig.ask()  # planning: negotiation pauses the clock, nothing charged
        out = rig.window(req.duration)
        assert out.completed
        commands_s = sum(c["runtime"] for c in rig.events("command"))
        work = _work_calls(rig)
        assert work and all(c["latency_s"] == THINK_S for c in work)
        thinking_s = THINK_S * len(work) if time_model == "charged" else 0.0
        assert out.used_s == pytest.approx(commands_s + thinking_s, abs=1e-9)


def test_a_reply_after_the_window_ended_is_not_run(tmp_path, suite):
    clock = FakeClock()
    script = SolverScript(memory_first=False)
    with FakeOpenAIServer(clock.answering(40.0, script), api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv, time_model="charged", clock=clock)
        rig.start("rev")
        rig.ask()
        out = rig.window(60)  # 40 s thinking + the help (5 s), then 40 s more: past the end
        assert out.used_s == 60.0 and not out.completed
        assert [c["tool"] for c in rig.events("command")] == ["bash"]
        assert len(_work_calls(rig)) == 2
        rig.ask()
        said = json.dumps(script.seen[-1]["messages"])
        assert "your window ended while you were deciding (nothing was run)" in said


def _condition(root, url, tmp_path, cache):
    model = {
        "model": "m-a",
        "base_url": url,
        "api_key_env": KEY_ENV,
        "timeout_s": 5.0,
        "max_retries": 2,
        "structured": "json_object_schema",
        "concurrency": 4,
    }
    over = {
        "name": "llm_solver_charged",
        "subruns": 1,
        "workers": {"count": 3},
        "tasks": {"suite": ["rev", "tac", "head"]},
        "models": {"local": model},
        "time": {"model": "charged"},
        "llm": {"cache": cache, "cache_file": str(tmp_path / "cache.sqlite")},
    }
    return load_params(root / "params" / "llm_solvers.yaml", over)


def _exact(lines: list[str]) -> list[str]:
    """Event lines minus only what says how an answer was obtained (attempts, cache hit), the
    wall clock, provenance and the cache mode; latencies stay: they were charged."""
    out = []
    for x in lines:
        d = json.loads(x)
        d.pop("wall")
        if d["kind"] == "run_started":
            d.pop("provenance")
            d["params"].pop("llm")
        if d["kind"] == "llm_call":
            d.pop("attempts")
            d.pop("cache_hit")
        out.append(json.dumps(d, sort_keys=True))
    return out


def test_a_charged_run_replays_to_the_same_events(root, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    clock = FakeClock()

    async def run(cond, out):
        cache = LlmCache(tmp_path / "cache.sqlite", cond.llm.cache)
        client = make_client(clock=clock)
        try:
            return await run_condition_async(cond, 0, out, llm=(client, cache))
        finally:
            await client.aclose()
            cache.close()

    with FakeOpenAIServer(
        clock.answering(THINK_S, SolverScript()), api_key=SECRET, models=("m-a",)
    ) as srv:
        url = srv.url
        live = asyncio.run(run(_condition(root, url, tmp_path, "read_write"), tmp_path / "live"))
    replay = asyncio.run(run(_condition(root, url, tmp_path, "replay"), tmp_path / "replay"))
    assert _exact(replay.log.lines) == _exact(live.log.lines)
    calls = tables_from_log(live.log)["llm_calls"]
    work = calls.filter((calls["role"] == "solver") & (calls["phase"] == "work"))
    assert work.height > 0 and (work["latency_s"] >= THINK_S).all()
    ended = [json.loads(x) for x in live.log.by_kind["window_ended"]]
    commands = [json.loads(x) for x in live.log.by_kind["command"]]
    # each worker's windows lasted longer than its commands: its thinking was charged
    for worker in {w["worker"] for w in ended}:
        used = sum(w["used"] for w in ended if w["worker"] == worker)
        ran = sum(c["runtime"] for c in commands if c["worker"] == worker)
        assert used > ran

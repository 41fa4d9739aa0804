"""The LLM solver under the paper's clock (`time.model: charged`) and with completion decided by
the hidden tests, through the loopback server. Latencies come from a fake clock that the
scripted server advances by a known amount per reply, so window time is exact. A completion
claim is no free oracle: it costs window time, at most one is checked per window, and its
evaluation runs off the event loop."""

from __future__ import annotations

import asyncio
import itertools
import json
import time

import pytest

from mbb.batch.build import load_params, run_condition_async
from mbb.core.agent_api import WindowGrant
from mbb.core.tables import tables_from_log
from mbb.llm.cache import LlmCache
from mbb.resource.resource import ToolCosts
from mbb.tasks import harness
from mbb.tasks.harness import CLAIMS_PER_WINDOW, claim_cost_s
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
        assert "not completed: not every hidden test passes; your window continues." in said
        assert "finished=false to hand it back" not in said  # a result, not advice (F-10)
        # the claim cost window time (a command of tool `claim`), then the reads ran
        cmds = rig.events("command")
        assert [c["tool"] for c in cmds] == ["claim", "read", "read"]
        assert cmds[0]["runtime"] == claim_cost_s(ToolCosts()) and cmds[0]["exit_code"] == 1
        assert not rig.run(rig.solver.evaluate()).resolved


def test_one_claim_per_window_then_the_next_window_completes(tmp_path, suite):
    """The rejected claim used the window's one check: the claim after the work is refused
    (nothing run or charged) and the task completes at the next window's claim."""
    script = SolverScript(memory_first=False, claim_early=True)
    with FakeOpenAIServer(script, api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv, loop={"max_turns_per_window": 12})
        rig.start("rev")
        first = rig.window(rig.ask().duration)
        assert not first.completed and not rig.solver.done
        rules = [e["rule"] for e in rig.events("invalid_action")]
        assert rules[0] == "not_completed" and set(rules[1:]) == {"claim_limit"}
        assert rig.solver.progress == 1.0  # the work is done: every hidden test passes
        second = rig.window(rig.ask().duration, rnd=2)
        assert second.completed and rig.solver.done and rig.solver.windows == 2
        claims = [c for c in rig.events("command") if c["tool"] == "claim"]
        assert [c["exit_code"] for c in claims] == [1, 0]
        assert rig.run(rig.solver.evaluate()).resolved


@pytest.mark.parametrize("time_model", ["virtual", "charged", "measured"])
def test_a_claim_loop_checks_at_most_the_limit_per_window_and_each_costs_time(
    tmp_path, suite, monkeypatch, time_model
):
    """A solver that claims completion turn after turn: per window at most CLAIMS_PER_WINDOW
    evaluations run, and the window's clock advances by each one's cost (modeled: 15 s;
    measured: its wall time); the refused claims run nothing and cost nothing."""
    runs: list[float] = []
    real = harness.evaluate_submission

    def counted(*args, **kwargs):
        ev = real(*args, **kwargs)
        runs.append(ev.wall_s)
        return ev

    monkeypatch.setattr(harness, "evaluate_submission", counted)
    script = SolverScript(memory_first=False, claim_loop=True)
    clock = FakeClock()
    think = THINK_S if time_model == "charged" else 0.0  # latency the charged clock counts
    with FakeOpenAIServer(clock.answering(THINK_S, script), api_key=SECRET) as srv:
        loop = {"max_turns_per_window": 6}
        rig = Rig(tmp_path, suite, srv, time_model=time_model, clock=clock, loop=loop)
        rig.start("rev")
        rig.ask()
        for rnd in (1, 2, 3):
            before = len(runs)
            start = rig.t
            out = rig.window(60, rnd=rnd)
            ran = len(runs) - before
            assert ran <= CLAIMS_PER_WINDOW and ran == 1 and not out.completed
            claims = [c for c in rig.events("command") if c["tool"] == "claim"][-ran:]
            cost = claim_cost_s(ToolCosts()) if time_model != "measured" else runs[-1]
            assert claims[0]["runtime"] == pytest.approx(cost)
            # the window's clock moved by the claim (after the model's first reply)
            assert claims[0]["t"] == pytest.approx(start + think + cost)
            assert out.used_s == pytest.approx(min(60.0, cost + 6 * think))
    refused = [e for e in rig.events("invalid_action") if e["rule"] == "claim_limit"]
    assert len(refused) == 3 * 5  # six turns a window: one checked, five refused
    assert len(runs) == 3


def test_a_claims_evaluation_runs_off_the_event_loop(tmp_path, suite, monkeypatch):
    """While the hidden tests of a claim run, the event loop (other seeds) keeps going."""
    real = harness.evaluate_submission

    def slow(*args, **kwargs):
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(harness, "evaluate_submission", slow)
    script = SolverScript(memory_first=False, claim_early=True, idle_reads=True)
    with FakeOpenAIServer(script, api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv, loop={"max_turns_per_window": 1})
        rig.start("rev")
        rig.ask()
        ticks: list[float] = []

        async def both():
            done = asyncio.Event()

            async def tick():
                while not done.is_set():
                    ticks.append(time.monotonic())
                    await asyncio.sleep(0.01)

            ticker = asyncio.create_task(tick())
            grant = WindowGrant("W1", 1, 1, 0.0, 60, 60.0)
            try:
                return await rig.solver.run_window(grant)
            finally:
                done.set()
                await ticker

        t0 = time.monotonic()
        asyncio.run(both())
        took = time.monotonic() - t0
    assert took >= 0.5
    # ticks kept coming throughout: no gap near the evaluation's half second
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(ticks) >= 30 and max(gaps) < 0.3


def test_progress_is_the_share_of_hidden_tests_passed(tmp_path, suite):
    """After each window in which a command ran, `progress` is what the hidden tests say of
    the workspace: 0 before anything is built, a share for a partial program, 1 when done."""
    partial = [
        (
            "write",
            {
                "path": "compile.sh",
                "text": "printf '#!/bin/sh\\ncat\\n' > executable\nchmod +x executable\n",
            },
        ),
    ]
    script = SolverScript(memory_first=False)
    with FakeOpenAIServer(script, api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv, loop={"max_turns_per_window": 1})
        rig.start("tac")
        rig.ask()
        rig.window(60)  # only `./reference --help`
        assert rig.solver.progress == 0.0
        script.extra_steps = partial
        rig.window(60, rnd=2)  # writes a compile.sh whose executable is `cat`
        ev = rig.run(rig.solver.evaluate())
        assert 0 < ev.passed < ev.total
        assert rig.solver.progress == pytest.approx(ev.passed / ev.total)


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

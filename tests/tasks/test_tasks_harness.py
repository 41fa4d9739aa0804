"""Solver tools on the resource, the time models, and the oracle's cut-off/resume behaviour."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from mbb.agents.oracle import OracleSolver, make_oracle_solver
from mbb.batch.build import load_params
from mbb.core.actions import Request
from mbb.core.agent_api import SolverView, TaskAssignment, WindowGrant
from mbb.core.scratch import Scratch
from mbb.resource.resource import ToolCosts
from mbb.tasks.harness import SolverTools


def test_tools_roundtrip_and_edit_errors(env, suite):
    env.resource.assign("W1", suite["rev"])
    env.grant("W1")
    t = SolverTools("W1", env.resource)
    assert t.write("src/a.txt", "one two two\n").ok
    r = t.read("src/a.txt")
    assert r.ok and r.output == "one two two\n"
    assert t.edit("src/a.txt", "one", "ONE").ok
    assert t.read("src/a.txt").output == "ONE two two\n"
    r = t.edit("src/a.txt", "two", "2")
    assert not r.ok and "2 times" in (r.error or "")
    r = t.edit("src/a.txt", "zzz", "2")
    assert not r.ok and "not found" in (r.error or "")
    r = t.edit("missing.txt", "a", "b")
    assert not r.ok and "cannot read" in (r.error or "")
    r = t.bash("cat docs.txt | head -1")
    assert r.ok and "./reference" in r.output
    tools = [e["tool"] for e in env.events("command")]
    assert tools == ["write", "read", "edit", "read", "edit", "edit", "edit", "bash"]


def test_memory_free_outside_window_release_and_request(env, suite):
    env.resource.assign("W1", suite["rev"])
    scratch = Scratch(max_chars=100)
    t = SolverTools("W1", env.resource, scratch=scratch, emit=env.log.emit, subrun=2)
    assert t.memory("remember the -s flag").ok  # no window needed
    assert scratch.entries[-1].text == "remember the -s flag"
    assert env.last("scratch_written")["text"] == "remember the -s flag"
    assert env.events("command") == []
    assert t.request(120) == Request(duration=120)
    env.grant("W1", 100)
    assert t.bash("true").runtime_s == env.resource.costs.bash
    used = t.release()
    assert used == env.resource.costs.bash and env.resource.holder is None
    assert t.bash("true").refused


def test_virtual_time_is_deterministic_and_charged(env, suite):
    env.resource.assign("W1", suite["rev"])
    env.grant("W1", 12)
    t = SolverTools("W1", env.resource)
    t.bash("sleep 0.2")  # measured runtime is irrelevant under the virtual model
    t.write("x", "y")
    assert env.resource.used_s("W1") == ToolCosts().bash + ToolCosts().write
    r = t.bash("true")  # 5 s left would need 5 s: fits exactly
    assert r.ok and env.resource.remaining_s("W1") == 0
    r = t.bash("true")
    assert r.refused and env.last()["reason"] == "window_over"


def test_virtual_cut_off_when_the_call_does_not_fit(env, suite):
    env.resource.assign("W1", suite["rev"])
    env.grant("W1", 7)
    t = SolverTools("W1", env.resource)
    t.bash("true")
    r = t.bash("touch late")  # 2 s left, costs 5 s: cut off at the hard end, never started
    assert r.killed and env.last()["killed"] and env.last()["reason"] == "window_end"
    assert env.last()["runtime"] == 2.0
    assert not (env.resource.workspace("W1") / "late").exists()
    assert env.resource.used_s("W1") == 7


def test_measured_time_charges_wall_runtime(measured_env, suite):
    env = measured_env
    env.resource.assign("W1", suite["rev"])
    env.grant("W1", 30)
    r = env.resource.run("W1", "sleep 0.3")
    assert r.ok and 0.3 <= r.runtime_s < 3
    assert env.last()["runtime"] == pytest.approx(r.runtime_s)


def _run_oracle(env, suite, task_id, window_s, view):
    solver = make_oracle_solver(
        "W1",
        suite=suite,
        resource=env.resource,
        emit=env.log.emit,
        time_model="virtual",
        rng=random.Random(1),
    )

    async def go():
        await solver.start_subrun(TaskAssignment(task_id, 0.0, 0), Scratch(1000))
        outcomes, now = [], 0.0
        while not solver.done and len(outcomes) < 50:
            action = await solver.next_action(view)
            assert isinstance(action, Request)
            grant = WindowGrant("W1", 0, len(outcomes), now, window_s, now + window_s)
            out = await solver.run_window(grant)
            assert out.used_s <= window_s
            outcomes.append(out)
            now += out.used_s + 1
        return outcomes, await solver.evaluate()

    return solver, *asyncio.run(go())


def test_oracle_stops_at_hard_end_and_resumes(env, suite):
    view = SolverView("W1", 0, 0.0, 1500.0, 12, 300)
    _, outcomes, result = _run_oracle(env, suite, "cut", 12, view)
    assert len(outcomes) >= 3 and outcomes[-1].completed
    assert not any(o.completed for o in outcomes[:-1])
    cut = [e for e in env.events("command") if e["killed"]]
    assert cut and all(e["reason"] == "window_end" for e in cut)
    assert result.score == 1.0 and result.resolved
    # every window is charged at most its allocation, and the log is deterministic in sim time
    for e in env.events("command"):
        assert e["runtime"] <= 12


def test_oracle_is_deterministic_under_virtual_time(tmp_path, suite):
    from conftest import Env

    logs = []
    for k in range(2):
        e = Env(tmp_path / str(k))
        view = SolverView("W1", 0, 0.0, 1500.0, 30, 300)
        _run_oracle(e, suite, "nl", 30, view)
        e.log.close()
        logs.append(
            [
                {
                    f: x[f]
                    for f in ("kind", "t", "tool", "command", "exit_code", "runtime")
                    if f in x
                }
                for x in map(json.loads, e.log.lines)
                if x["kind"] == "command"
            ]
        )
    assert logs[0] == logs[1]


def test_oracle_need_and_request(env, suite):
    solver = OracleSolver("W1", suite=suite, resource=env.resource, emit=None)
    asyncio.run(solver.start_subrun(TaskAssignment("rev", 0.0, 0), None))
    assert solver.need_s() == 3 + 3 + 2 + 2 + 10 + 5  # observe x2, write x2, compile, self-test
    view = SolverView("W1", 0, 0.0, 1500.0, 30, 300)
    assert asyncio.run(solver.next_action(view)) == Request(duration=30)
    assert not solver.done


def test_time_model_mismatch_is_an_error(env, suite):
    with pytest.raises(ValueError, match="does not match"):
        make_oracle_solver(
            "W1", suite=suite, resource=env.resource, emit=None, time_model="measured", rng=None
        )


def test_params_file_loads():
    from pathlib import Path

    c = load_params(Path(__file__).resolve().parents[2] / "params" / "real_tasks_oracle.yaml")
    assert c.tasks.kind == "real" and c.workers.solver == "oracle" and c.time.model == "virtual"


def test_missing_bubblewrap_names_the_install_command(monkeypatch, tmp_path):
    from mbb.resource import sandbox
    from mbb.resource.resource import ExecutionResource

    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    monkeypatch.setattr(sandbox, "_BWRAP", str(tmp_path / "no-bwrap"))
    with pytest.raises(sandbox.SandboxUnavailable, match="apt-get install -y bubblewrap"):
        ExecutionResource(tmp_path / "r")


def test_oracle_under_measured_time(measured_env, suite):
    env = measured_env
    solver = make_oracle_solver(
        "W1",
        suite=suite,
        resource=env.resource,
        emit=env.log.emit,
        time_model="measured",
        rng=None,
    )

    async def go():
        await solver.start_subrun(TaskAssignment("wc", 0.0, 0), None)
        out = await solver.run_window(WindowGrant("W1", 0, 0, 0.0, 120, 120.0))
        return out, await solver.evaluate()

    out, result = asyncio.run(go())
    assert out.completed and 0 < out.used_s < 60  # real seconds, far below the allocation
    runtimes = [
        e["runtime"]
        for e in env.events("command")
        if e["tool"] != "compile" or e["reason"] != "evaluation"
    ]
    assert all(r > 0 for r in runtimes)
    assert result.score == 1.0

"""The LLM solver's tool loop on a real task, through the real `openai` client and the loopback
test server: both action protocols, arena notices, bad output, an unavailable endpoint, the turn
limit, the default request, the after-action report, and whole conditions with replay."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from mbb.agents.llm_solver import LlmSolver, make_llm_solver, parse_tool_call
from mbb.batch.build import load_params, run_condition
from mbb.core.actions import Request, Withdraw
from mbb.core.agent_api import SolverView, SubrunRecap, TaskAssignment, WindowGrant
from mbb.core.eventlog import EventLog
from mbb.core.scratch import Scratch
from mbb.core.tables import tables_from_log
from mbb.llm.client import LlmResult
from mbb.llm.structured import InvalidOutput
from mbb.params import SolverLoopParams
from mbb.resource.resource import ExecutionResource
from mbb.tasks.suite import build_suite
from mbb.testing.testserver import FakeOpenAIServer, Reply

from .conftest import KEY_ENV, SECRET, make_client, make_config, replay_comparable
from .solver_model import SolverScript, worker_of


@pytest.fixture(scope="module")
def suite():
    return build_suite(tasks=["rev", "tac", "head"])


class Rig:
    """One LLM solver on a fresh resource, driven by hand like the arena drives it."""

    def __init__(
        self,
        tmp: Path,
        suite,
        server: FakeOpenAIServer,
        *,
        time_model: str = "virtual",
        clock=None,
        **config,
    ) -> None:
        self.log = EventLog("solver-test", tmp / "events.jsonl")
        self.resource = ExecutionResource(tmp / "res", emit=self.log.emit, time_model=time_model)
        self.scratch = Scratch(4000, on_write=lambda e, d: None)
        self.loop = SolverLoopParams(**config.pop("loop", {}))
        self.solver: LlmSolver = make_llm_solver(
            "W1",
            config=make_config(server, **config),
            llm=make_client() if clock is None else make_client(clock=clock),
            suite=suite,
            resource=self.resource,
            emit=self.log.emit,
            cache=None,
            loop=self.loop,
            window_min_s=30,
            window_max_s=300,
            n_others=2,
            time_model=time_model,
        )
        self.t = 0.0

    def run(self, coro):
        return asyncio.run(coro)

    def start(self, task: str = "rev") -> None:
        self.run(self.solver.start_subrun(TaskAssignment(task, 0.0, 1), self.scratch))

    def ask(self, deadline: float = 1500.0) -> Request | Withdraw | None:
        view = SolverView("W1", 1, self.t, deadline, 30, 300)
        return self.run(self.solver.next_action(view))

    def window(self, seconds: int, deadline: float = 1500.0, rnd: int = 1):
        grant = WindowGrant("W1", 1, rnd, self.t, seconds, min(self.t + seconds, deadline))
        out = self.run(self.solver.run_window(grant))
        self.t += out.used_s
        return out

    def events(self, kind: str) -> list[dict]:
        return [json.loads(x) for x in self.log.by_kind[kind]]


@pytest.mark.parametrize(
    ("protocol", "structured"),
    [("json_action", "json_object_schema"), ("json_action", "json_schema"), ("native", None)],
)
def test_tool_loop_solves_a_real_task(tmp_path, suite, protocol, structured):
    script = SolverScript()
    with FakeOpenAIServer(script, api_key=SECRET) as srv:
        mode = {"structured": structured} if structured else {}
        rig = Rig(tmp_path, suite, srv, tool_protocol=protocol, **mode)
        rig.start("rev")
        req = rig.ask()
        assert req == Request(duration=60)
        out = rig.window(req.duration)
        assert out.completed and not out.released
        res = rig.run(rig.solver.evaluate())
        assert res.resolved and res.total >= 30
        assert rig.solver.progress == 1.0 and rig.solver.done
        assert rig.ask() is None  # finished: nothing more to request

        calls = rig.events("llm_call")
        assert [c["phase"] for c in calls[:2]] == ["request", "request"]  # note, then request
        assert {c["role"] for c in calls} == {"solver"}
        assert all(c["round"] == 1 for c in calls if c["phase"] == "work")
        cmds = rig.events("command")
        assert [c["tool"] for c in cmds][:2] == ["bash", "write"]
        assert not any(c["refused"] for c in cmds)
        assert rig.scratch.of_kind("note"), "the memory tool wrote a note"

        last = script.seen[-1]
        if protocol == "native":
            assert last["tools"] and last["tool_choice"] == "required"
            tool_msgs = [m for m in last["messages"] if m["role"] == "tool"]
            assert tool_msgs and all(m["tool_call_id"] == "call_1" for m in tool_msgs)
            assert "response_format" not in last
        elif structured == "json_schema":  # strict mode: an object at the root
            schema = last["response_format"]["json_schema"]["schema"]
            assert schema["type"] == "object" and schema["properties"]["tool"]["enum"]
        else:  # grammar-constrained: each tool tied to its own arguments
            schema = last["response_format"]["schema"]
            assert last["response_format"]["type"] == "json_object"
            tied = {alt["properties"]["tool"]["const"]: alt for alt in schema["anyOf"]}
            assert tied["bash"]["properties"]["args"]["required"] == ["command"]
            assert '"tool"' in last["messages"][0]["content"]  # the schema, in the prompt
        text = json.dumps(last["messages"])
        assert "[arena] Your window has started: 60 s" in text
        assert "s left in this window" in text
        assert SECRET not in rig.log.path.read_text()


def test_notices_warn_of_the_deadline_and_the_window_end(tmp_path, suite):
    script = SolverScript(memory_first=False)
    with FakeOpenAIServer(script, api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv, loop={"deadline_warning_s": 100})
        rig.start("rev")
        rig.ask(deadline=80.0)
        out = rig.window(6, deadline=80.0)  # the help (5 s) fits; the first write (2 s) not
        assert not out.completed and out.used_s == pytest.approx(6.0)
        rig.ask(deadline=80.0)
        text = json.dumps(script.seen[-1]["messages"])
        assert "Deadline approaching: 75 s" in text
        assert "Your window is over (allocation): you used 6 s of 6 s" in text
        # the cut-off write is redone in the next window, and the task finishes there
        out = rig.window(60, deadline=80.0, rnd=2)
        assert out.completed
        killed = [c for c in rig.events("command") if c["killed"]]
        assert len(killed) == 1


def test_bad_output_is_reported_back_and_recorded(tmp_path, suite):
    script = SolverScript(invalid_first=True, memory_first=False)
    with FakeOpenAIServer(script, api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv)
        rig.start("rev")
        rig.window(rig.ask().duration)
        bad = rig.events("invalid_action")
        assert len(bad) == 1 and bad[0]["rule"] == "reported"
        assert bad[0]["phase"] == "solver_work" and bad[0]["field"] == "output"
        # the model saw its error as the turn's result, and went on to finish the task
        second = script.seen[2]["messages"]
        assert any("nothing was run" in (m.get("content") or "") for m in second)
        assert rig.solver.done


@pytest.mark.parametrize(
    ("result", "field"),
    [
        (LlmResult(text='{"tool": "rm", "args": {}}'), "tool"),
        (LlmResult(text='{"tool": "edit", "args": {"path": "a"}}'), "args.old"),
        (LlmResult(text='{"tool": "request", "args": {"seconds": "lots"}}'), "args.seconds"),
        (LlmResult(text="I think I should look first."), "output"),
        (LlmResult(tool_name="bash", tool_arguments="{not json"), "args"),
        (LlmResult(tool_name="bash", tool_arguments='{"cmd": "ls"}'), "args.command"),
        (LlmResult(refusal="no"), "refusal"),
        (
            LlmResult(text='{"tool": "write", "args": {"path": "a", "te', finish_reason="length"),
            "output",
        ),
    ],
)
def test_parse_tool_call_names_the_offending_field(result, field):
    with pytest.raises(InvalidOutput) as err:
        parse_tool_call(result)
    assert err.value.field == field


def test_a_tool_outside_its_place_is_refused_with_a_message(tmp_path, suite):
    script = SolverScript(memory_first=False)
    with FakeOpenAIServer(api_key=SECRET) as srv:
        srv.responder = script
        # outside a window the model tries to run a command: not executed, told why
        srv.push(Reply.json({"tool": "bash", "args": {"command": "ls"}}))
        rig = Rig(tmp_path, suite, srv)
        rig.start("rev")
        assert rig.ask() == Request(duration=60)
        bad = rig.events("invalid_action")
        assert bad[0]["field"] == "tool" and bad[0]["value"] == "bash"
        assert not rig.events("command")  # nothing ran on the resource


def test_unavailable_endpoint_releases_the_window(tmp_path, suite, monkeypatch):
    script = SolverScript(memory_first=False)
    with FakeOpenAIServer(script, api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv, max_retries=1)
        rig.start("rev")
        req = rig.ask()
        srv.push(Reply.error(500, "boom"), Reply.error(500, "boom again"))
        out = rig.window(req.duration)
        assert out.released and out.used_s == 0.0 and not out.completed
        bad = rig.events("invalid_action")
        assert bad[-1]["rule"] == "release" and bad[-1]["field"] == "llm"
        failed = [c for c in rig.events("llm_call") if c["error"]]
        assert len(failed) == 1 and failed[0]["attempts"] == 2


def test_turn_limit_releases_the_window(tmp_path, suite):
    script = SolverScript(memory_first=False, idle_reads=True)
    with FakeOpenAIServer(script, api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv, loop={"max_turns_per_window": 4})
        rig.start("rev")
        out = rig.window(rig.ask().duration)
        assert out.released and out.used_s == pytest.approx(4.0)  # four reads of 1 s
        work = [c for c in rig.events("llm_call") if c["phase"] == "work"]
        assert len(work) == 4
        rig.ask()
        assert "released after the limit of 4 turns" in json.dumps(script.seen[-1])


def test_no_request_gets_the_stated_default(tmp_path, suite):
    script = SolverScript(never_request=True)
    with FakeOpenAIServer(script, api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv, loop={"planning_turns": 3})
        rig.start("rev")
        assert rig.ask() == Request(duration=300)  # the estimate before any request: max
        assert len(rig.events("llm_call")) == 3
        bad = rig.events("invalid_action")
        assert bad[-1]["rule"] == "default" and bad[-1]["phase"] == "solver_request"
        assert len(rig.scratch.of_kind("note")) == 3
        # the default is stated where it applies, with its numbers (F-5) ...
        first = json.dumps(script.seen[0]["messages"])
        assert (
            "You have 3 turn(s) to call `request` or `withdraw`; without either, a request of "
            "300 s is made for you." in first
        )
        # ... and the model is told at its next turn that it was applied, never left to guess
        told = "No request was made in 3 turn(s) outside the window: a 300-second request"
        assert told not in json.dumps(script.seen[-1]["messages"])
        rig.window(60)
        assert told in json.dumps(script.seen[-1]["messages"])


def test_withdraw_outside_a_window(tmp_path, suite):
    with FakeOpenAIServer(api_key=SECRET) as srv:
        srv.push(Reply.json({"tool": "withdraw", "args": {"reason": "cannot finish in time"}}))
        rig = Rig(tmp_path, suite, srv)
        rig.start("rev")
        assert rig.ask() == Withdraw(reason="cannot finish in time")
        assert rig.ask() is None


def test_hostile_commands_stay_in_the_sandbox(tmp_path, suite):
    hostile = [
        ("bash", {"command": "cat /etc/shadow"}),
        ("bash", {"command": "cat $(command -v rev) > stolen; ls /root"}),
        ("read", {"path": "../../../../etc/passwd"}),
        ("bash", {"command": "curl -s http://example.com || echo offline"}),
    ]
    script = SolverScript(memory_first=False, extra_steps=hostile)
    with FakeOpenAIServer(script, api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv, loop={"max_turns_per_window": 12})
        rig.start("rev")
        out = rig.window(rig.ask().duration)
        assert not out.completed  # the failing hostile steps are retried until the turn limit
        results = [m for m in script.seen[-1]["messages"] if m["role"] == "user"]
        text = "\n".join(m["content"] for m in results)
        assert "root:" not in text  # no host password file reached the model
        stolen = rig.resource.workspace("W1") / "stolen"
        assert not stolen.exists() or stolen.stat().st_size == 0
        assert rig.events("command")


def test_after_action_report_goes_to_scratch_only_with_memory(tmp_path, suite):
    script = SolverScript(memory_first=False)
    with FakeOpenAIServer(script, api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv)
        rig.start("rev")
        rig.window(rig.ask().duration)
        recap = SubrunRecap("W1", 1, "rev", "completed", 1.0, 900, 100, 1, 60, 20, 0, [])
        rig.run(rig.solver.end_subrun(recap, None))
        assert not [c for c in rig.events("llm_call") if c["role"] == "report"]
        # reports off (memory on): scratch refuses reports, so the model is not even asked
        rig.scratch.restrict(refuse=("report", "solver_report"))
        rig.run(rig.solver.end_subrun(recap, rig.scratch))
        assert not [c for c in rig.events("llm_call") if c["role"] == "report"]
        rig.scratch.restrict()
        rig.run(rig.solver.end_subrun(recap, rig.scratch))
        reports = rig.scratch.of_kind("solver_report")
        assert reports and reports[0].text.startswith("Solver report")
        assert not rig.scratch.of_kind("report") and reports[0].by == "solver"
        call = [c for c in rig.events("llm_call") if c["role"] == "report"]
        assert call[0]["phase"] == "solver_report"
        user = srv.completions[-1].body["messages"][1]["content"]
        assert "write compile.sh" in user and "Commands you ran (" in user


# --- whole conditions through the arena --------------------------------------------------------
def _condition(root, url, tmp_path, protocol="json_action", cache="read_write", **extra):
    model = {
        "model": "m-a",
        "base_url": url,
        "api_key_env": KEY_ENV,
        "timeout_s": 5.0,
        "max_retries": 2,
        "structured": "json_object_schema",
        "tool_protocol": protocol,
        "concurrency": 4,
    }
    over = {
        "name": f"llm_solver_{protocol}",
        "subruns": 2,
        "workers": {"count": 3},
        "tasks": {"suite": ["rev", "tac", "head"]},
        "models": {"local": model},
        "llm": {"cache": cache, "cache_file": str(tmp_path / "cache.sqlite")},
        **extra,
    }
    return load_params(root / "params" / "llm_solvers.yaml", over)


def test_condition_with_llm_negotiators_and_solvers(root, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    script = SolverScript()
    with FakeOpenAIServer(script, api_key=SECRET, models=("m-a",)) as srv:
        url = srv.url
        result = run_condition(_condition(root, url, tmp_path), 0, tmp_path / "live")
        n_live = len(srv.completions)
        t = tables_from_log(result.log)
        ev = t["evaluations"]
        done = ev.filter(ev["outcome"] == "completed")
        # the stand-in negotiator may withdraw (a random valid declaration); every solver
        # that kept its worker in the queue solved its task
        assert ev.height == 6 and done.height >= 4 and (done["score"] == 1.0).all()
        assert set(ev["outcome"]) <= {"completed", "withdrawn"}
        calls = t["llm_calls"]
        assert set(calls["role"]) >= {"negotiator", "solver", "report", "summary"}
        assert set(calls.filter(calls["role"] == "solver")["phase"]) == {"request", "work"}
        assert {worker_of(b) for b in script.seen} == {"W1", "W2", "W3"}
        scratch = [json.loads(x) for x in result.log.by_kind["scratch_written"]]
        assert sum(1 for s in scratch if s["entry"] == "report") == 6  # the negotiators'
        assert sum(1 for s in scratch if s["entry"] == "solver_report") == 6  # the solvers'
        # replay: the server is gone, the cache answers everything, the events are the same
    # the same base_url, now closed: any request would fail the run
    replay = run_condition(_condition(root, url, tmp_path, cache="replay"), 0, tmp_path / "replay")
    assert n_live > 0
    assert replay_comparable(replay.log.lines) == replay_comparable(result.log.lines)
    hits = tables_from_log(replay.log)["llm_calls"]
    assert hits["cache_hit"].all() and hits.height == t["llm_calls"].height
    for path in (tmp_path / "live").rglob("*"):
        if path.is_file() and path.suffix in (".jsonl", ".json", ".parquet", ".txt"):
            assert SECRET.encode() not in path.read_bytes(), path


def test_condition_with_native_tool_calls(root, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    script = SolverScript()
    with FakeOpenAIServer(script, api_key=SECRET, models=("m-a",)) as srv:
        cond = _condition(root, srv.url, tmp_path, protocol="native", subruns=1)
        result = run_condition(cond, 3, tmp_path / "out")
    ev = tables_from_log(result.log)["evaluations"]
    done = ev.filter(ev["outcome"] == "completed")
    assert ev.height == 3 and done.height >= 2 and (done["score"] == 1.0).all()
    assert all(b.get("tools") for b in script.seen)


def test_old_turns_are_dropped_in_chunks_so_the_prompt_keeps_its_prefix(tmp_path, suite):
    from mbb.agents.llm_solver import _Turn

    with FakeOpenAIServer(SolverScript(), api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv, loop={"history_turns": 4})
        rig.start("rev")
        solver = rig.solver
        prev: list = []
        restarts = 0
        for i in range(12):
            solver._turns.append(_Turn([{"role": "user", "content": f"turn {i}"}]))
            msgs = solver._request().messages
            turns = [m for m in msgs if m["content"].startswith("turn ")]
            assert 1 <= len(turns) <= 4 and turns[-1]["content"] == f"turn {i}"
            if prev and msgs[: len(prev)] != prev:
                restarts += 1
                assert "earlier turns omitted" in msgs[len(solver._head)]["content"]
            prev = msgs
        assert restarts == 3  # a sliding window would have changed the prefix 8 times


def test_under_memory_off_the_memory_tool_says_so_and_the_refusal_is_recorded(tmp_path, suite):
    """Memory off (scratch keeps only after-action reports): the note is not saved, the model
    is told memory is off, and the refused write is a `scratch_written` event (not accepted)."""
    script = SolverScript()  # a note before its first request
    with FakeOpenAIServer(script, api_key=SECRET) as srv:
        rig = Rig(tmp_path, suite, srv)
        rig.scratch.restrict(allow={"report"})
        rig.start("rev")
        rig.ask()
        said = json.dumps(script.seen[-1]["messages"])
    assert "error: memory is off in this condition: the note was not saved" in said
    assert not rig.scratch.of_kind("note")
    (refused,) = rig.events("scratch_written")
    assert refused["entry"] == "note" and refused["accepted"] is False

"""Issue 17, item 4: tool arguments checked before anything runs (NUL, lone surrogates, length),
errors back to the solver at no charge, no shell interpolation of paths, commands that ran
always charged — and nothing a solver sends makes the resource raise."""

from __future__ import annotations

import json
import os
import random

import pytest

from mbb.resource.resource import MAX_COMMAND_BYTES
from mbb.tasks.harness import MAX_PATH_BYTES, SolverTools

BIG = "x" * (200 << 10)  # 200 KiB
BAD = {"nul": "a\x00b", "surrogate": "a\ud800b", "lone_low": "\udfffz"}


@pytest.fixture
def w1(env, suite):
    env.resource.assign("W1", suite["rev"])
    env.grant("W1")
    return env


def _calls(limits_file_bytes: int):
    """(name, call(tools, bad)) for every argument of every tool."""
    huge_text = "y" * (limits_file_bytes + 1)
    return {
        "bash.command": (lambda t, b: t.bash(f"echo {b}"), BIG + "x" * MAX_COMMAND_BYTES),
        "read.path": (lambda t, b: t.read(b), "p" * (MAX_PATH_BYTES + 1)),
        "write.path": (lambda t, b: t.write(b, "text"), "p" * (MAX_PATH_BYTES + 1)),
        "write.text": (lambda t, b: t.write("f.txt", b), huge_text),
        "edit.path": (lambda t, b: t.edit(b, "a", "b"), "p" * (MAX_PATH_BYTES + 1)),
        "edit.old": (lambda t, b: t.edit("f.txt", b, "b"), huge_text),
        "edit.new": (lambda t, b: t.edit("f.txt", "a", b), huge_text),
    }


def _check_refused(env, res, n_events_before: int, used_before: float) -> None:
    assert not res.ok and res.refused and res.runtime_s == 0.0
    assert "invalid arguments" in (res.error or "")
    events = env.events("command")
    assert len(events) == n_events_before + 1  # recorded once
    ev = events[-1]
    assert ev["refused"] and ev["reason"].startswith("invalid_arguments") and ev["runtime"] == 0
    assert env.resource.used_s("W1") == used_before  # charged nothing
    json.dumps(ev).encode("utf-8")  # the record itself is valid UTF-8 JSON


@pytest.mark.parametrize("kind", ["nul", "surrogate", "lone_low", "length"])
@pytest.mark.parametrize(
    "name", ["bash.command", "read.path", "write.path", "write.text", "edit.path", "edit.old"]
)
def test_bad_argument_refused_before_anything_runs(w1, name, kind):
    call, long_value = _calls(w1.resource.limits.file_bytes)[name]
    bad = long_value if kind == "length" else BAD[kind]
    t = SolverTools("W1", w1.resource)
    assert t.write("f.txt", "a\n").ok
    before = sorted(p.name for p in w1.resource.workspace("W1").iterdir())
    n, used = len(w1.events("command")), w1.resource.used_s("W1")
    res = call(t, bad)
    _check_refused(w1, res, n, used)
    assert sorted(p.name for p in w1.resource.workspace("W1").iterdir()) == before
    assert t.read("f.txt").output == "a\n"  # the window goes on
    w1.log.close()
    for line in (w1.log.path).read_text().splitlines():  # the log stays readable
        json.loads(line)


def test_edit_new_text_checked_too(w1):
    t = SolverTools("W1", w1.resource)
    t.write("f.txt", "a\n")
    for bad in (*BAD.values(), "z" * (w1.resource.limits.file_bytes + 1)):
        n, used = len(w1.events("command")), w1.resource.used_s("W1")
        _check_refused(w1, t.edit("f.txt", "a", bad), n, used)
    assert t.read("f.txt").output == "a\n"


@pytest.mark.parametrize("value", [None, b"bytes", 42, ["ls"], {"a": 1}])
def test_non_text_arguments_refused_not_raised(w1, value):
    t = SolverTools("W1", w1.resource)
    for res in (t.bash(value), t.read(value), t.write(value, "x"), t.write("f", value)):
        assert not res.ok and res.runtime_s == 0.0
    r = w1.resource.run("W1", "true", stdin=value)  # type: ignore[arg-type]
    assert r.refused or (value == b"bytes" and r.ok)


def test_200_kib_command_is_refused_not_raised(w1):
    r = w1.resource.run("W1", "echo " + BIG)
    assert r.refused and r.reason.startswith("invalid_arguments") and r.runtime_s == 0
    r = w1.resource.run("W1", "true", args=["a" * (200 << 10)])
    assert r.refused


INJECTIONS = [
    "x\ntouch /workspace/pwned",
    "x; touch /workspace/pwned",
    "$(touch /workspace/pwned)",
    "`touch /workspace/pwned`",
    "x' ; touch /workspace/pwned ; echo '",
    'x" ; touch /workspace/pwned ; echo "',
    "x && touch /workspace/pwned",
    "x | touch /workspace/pwned",
    "x # \n touch /workspace/pwned",
    "-n\ntouch /workspace/pwned",
]


@pytest.mark.parametrize("path", INJECTIONS, ids=range(len(INJECTIONS)))
def test_paths_never_reach_a_shell(w1, path):
    t = SolverTools("W1", w1.resource)
    ws = w1.resource.workspace("W1")
    r = t.edit(path, "a", "b")
    assert not r.ok and w1.last()["tool"] == "edit"
    assert not (ws / "pwned").exists()
    assert not t.read(path).ok
    assert not (ws / "pwned").exists()
    if "/" in path:  # its directories would be created: not the point here
        return
    assert t.write(path, "a1\n").ok  # a file of exactly that name
    assert (ws / path).read_text() == "a1\n"
    assert t.edit(path, "a", "b").ok and t.read(path).output == "b1\n"
    assert not (ws / "pwned").exists()
    n_edits = sum(1 for e in w1.events("command") if e["tool"] == "edit")
    assert n_edits == 2  # each edit is one command, billed once


def test_edit_command_line_holds_no_path(w1):
    t = SolverTools("W1", w1.resource)
    t.write("f.txt", "a")
    t.edit("f.txt", "a", "b")
    ev = w1.last()
    script = ev["command"].split(" # args: ")[0]
    assert "f.txt" not in script and ev["command"].endswith("# args: f.txt")


# --- commands that ran are always charged -----------------------------------------------------
@pytest.mark.parametrize(
    "cmd",
    [
        "exit 3",
        "printf '\\xff\\xfe\\x00bad'",  # not UTF-8 output
        "printf '\\xff' >&2; kill -9 $$",
        "yes flood",
        "python3 -c 'import os; os.abort()'",
    ],
)
def test_commands_that_ran_are_charged(w1, cmd):
    before = w1.resource.used_s("W1")
    r = w1.resource.run("W1", cmd)
    assert not r.refused and r.runtime_s == w1.resource.costs.bash
    assert w1.resource.used_s("W1") == before + w1.resource.costs.bash
    assert w1.last()["runtime"] == w1.resource.costs.bash


def test_fuzzed_arguments_never_raise(w1):
    rng = random.Random(17)
    alphabet = ["a", "\x00", "\ud800", "\udfff", "\n", "'", '"', "$", "`", "é", "\U0001f600"]
    t = SolverTools("W1", w1.resource)
    for _ in range(40):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        for res in (t.bash(s), t.read(s), t.write(s or "f", s), t.edit(s or "f", s or "a", s)):
            assert res.runtime_s >= 0.0 and (res.ok or res.error)
    w1.log.close()
    for line in w1.log.path.read_text().splitlines():
        json.loads(line)


def test_a_solver_failing_mid_window_is_charged_what_ran(root, tmp_path, monkeypatch):
    """The arena charges the resource's clock, not 0, when a solver raises mid-window."""
    from mbb.agents.oracle import OracleSolver
    from mbb.batch.build import load_params, run_condition

    orig = OracleSolver.run_window
    state = {"failed": False}

    async def failing(self, grant):
        if not state["failed"] and self.worker == "W1":
            state["failed"] = True
            self.resource.open_window(grant)
            self.tools.bash("true")
            self.tools.bash("echo ran")
            raise RuntimeError("solver crashed mid-window")
        return await orig(self, grant)

    monkeypatch.setattr(OracleSolver, "run_window", failing)
    cond = load_params(
        root / "params" / "real_tasks_oracle.yaml", {"workers": {"count": 2}, "subruns": 1}
    )
    result = run_condition(cond, 0, tmp_path)
    events = [json.loads(x) for x in result.log.lines]
    ended = [e for e in events if e["kind"] == "window_ended" and e["worker"] == "W1"]
    cost = 2 * 5.0  # two bash commands at the default virtual cost
    assert ended[0]["used"] == pytest.approx(cost)
    failures = [e for e in events if e["kind"] == "invalid_action" and e["phase"] == "execution"]
    assert failures and "after 10 s" in failures[0]["rule"]


@pytest.mark.parametrize("tool", [None, 3, "x\x00y", "\ud800"])
def test_odd_tool_labels_are_recorded_not_raised(w1, tool):
    r = w1.resource.run("W1", "true", tool=tool)  # type: ignore[arg-type]
    assert r.ok and isinstance(w1.last()["tool"], str)


def test_llm_solver_report_lines_are_printable():
    from mbb.resource.resource import printable

    assert printable("a\x00b\ud800") == "a\\x00b\\ud800"
    printable("a\x00b\ud800").encode("utf-8")


def test_progress_does_not_follow_a_link_out_of_the_workspace(w1, suite):
    """A solver's progress is what the hidden tests say of its workspace, measured in the
    evaluation's sandbox: an executable that links to a host file (the hidden tests) scores
    nothing there, and the oracle's reconstruction scores everything."""
    import asyncio
    import shutil

    from mbb.agents.oracle import DEFAULT_ORACLE_DIR
    from mbb.tasks.harness import WorkspaceEvaluation

    class Probe(WorkspaceEvaluation):
        def __init__(self) -> None:
            self.worker, self.suite, self.resource, self.emit = "W1", suite, w1.resource, None
            self.task_id, self.last_evaluation, self.tools = "rev", None, None
            self.measured, self.progress_share = None, 0.0

    ws = w1.resource.workspace("W1")
    os.symlink(suite["rev"].tests_path, ws / "executable")
    (ws / "compile.sh").write_text("true\n")
    assert asyncio.run(Probe().measure_progress()) == 0.0
    (ws / "executable").unlink()
    for f in (DEFAULT_ORACLE_DIR / "rev").iterdir():
        shutil.copy(f, ws / f.name)
    assert asyncio.run(Probe().measure_progress()) == 1.0

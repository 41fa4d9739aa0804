"""The solver's tools on a real task, backend-agnostic (the oracle now, an LLM tool loop later).

`read`, `write`, `edit` and `bash` all run as commands on the shared resource, so they work only
inside the worker's window, are confined to its sandbox (a symlink to a hidden path leads
nowhere), and are charged to the window by the resource's time model. `memory` writes to the
worker's scratch and is free at any time; `release` ends the window early; `request` records the
window the solver wants next (the arena collects it via the solver's `next_action`).

Arguments are checked before anything runs: a path (at most 4,096 bytes), a text, an `old` or
`new` (at most the sandbox's file size limit) with a NUL byte or a lone surrogate is refused
with reason `invalid_arguments: ...`, recorded as a refused command, charged nothing, and its
error goes back to the solver (the resource checks commands the same way). A path is never put
into a shell command: it is the script's `$1` (read, write) or the edit program's argv[1]. A
command that ran is charged by the resource's time model whatever its outcome.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mbb.core.actions import Request
from mbb.core.agent_api import EvaluationResult
from mbb.core.events import ScratchWritten
from mbb.resource.resource import CommandResult, ExecutionResource, check_argument
from mbb.tasks.evaluator import Evaluation, evaluate_submission
from mbb.tasks.suite import Suite

if TYPE_CHECKING:
    from mbb.core.scratch import Scratch  # agents' memory, passed in by the protocol

__all__ = ["SolverTools", "ToolResult", "WorkspaceEvaluation"]

_EDIT = r"""
import json, sys
a, path = json.load(sys.stdin), sys.argv[1]
try:
    s = open(path, encoding="utf-8", errors="surrogateescape").read()
except OSError as e:
    print(f"cannot read {path}: {e.strerror}", file=sys.stderr); sys.exit(2)
n = s.count(a["old"])
if n != 1:
    print(n); sys.exit(3)
with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
    f.write(s.replace(a["old"], a["new"], 1))
"""
MAX_PATH_BYTES = 4096
_READ = 'cat -- "$1"'
_WRITE = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
_EDIT_CMD = f'/usr/bin/python3 -c {shlex.quote(_EDIT)} "$1"'


@dataclass(frozen=True, slots=True)
class ToolResult:
    ok: bool
    output: str  # stdout (read: the file's text)
    error: str | None  # a clear message when not ok
    runtime_s: float
    killed: bool = False
    refused: bool = False

    @classmethod
    def of(cls, r: CommandResult, error: str | None = None) -> ToolResult:
        if r.refused and (r.reason or "").startswith("invalid_arguments"):
            why = (r.reason or "").split(": ", 1)[-1]
            error = f"invalid arguments: {why} (nothing was run or charged)"
        elif r.refused:
            error = f"refused: {r.reason} (commands run only inside your window)"
        elif r.killed:
            error = f"cut off: {r.reason}"
        elif error is None and r.exit_code != 0:
            error = f"exit code {r.exit_code}: {r.stderr.strip()[-500:]}"
        return cls(r.ok and error is None, r.stdout, error, r.runtime_s, r.killed, r.refused)


class SolverTools:
    """One worker's tool belt on the shared resource."""

    def __init__(
        self,
        worker: str,
        resource: ExecutionResource,
        *,
        scratch: Scratch | None = None,
        emit: Callable[..., Any] | None = None,
        subrun: int = 0,
    ) -> None:
        self.worker = worker
        self.resource = resource
        self.scratch = scratch
        self.emit = emit
        self.subrun = subrun
        self.pending_request: Request | None = None
        self.released = False

    def _invalid(
        self, tool: str, command: str, path: object, texts: Sequence[tuple[str, object]]
    ) -> ToolResult | None:
        """Check the arguments before anything runs; a refusal is recorded and returned."""
        problem = check_argument(path, "the path", MAX_PATH_BYTES)
        if problem is None and path == "":
            problem = "the path is empty"
        cap = self.resource.limits.file_bytes
        for what, value in texts:
            problem = problem or check_argument(value, what, cap)
        if problem is None:
            return None
        shown = path if check_argument(path, "", MAX_PATH_BYTES) is None else repr(path)[:200]
        r = self.resource.refuse_invalid(self.worker, command, tool, problem, (str(shown),))
        return ToolResult.of(r)

    def read(self, path: str) -> ToolResult:
        bad = self._invalid("read", _READ, path, ())
        if bad is not None:
            return bad
        return ToolResult.of(self.resource.run(self.worker, _READ, tool="read", args=(path,)))

    def write(self, path: str, text: str) -> ToolResult:
        bad = self._invalid("write", _WRITE, path, (("the text", text),))
        if bad is not None:
            return bad
        r = self.resource.run(self.worker, _WRITE, tool="write", stdin=text.encode(), args=(path,))
        return ToolResult.of(r)

    def edit(self, path: str, old: str, new: str) -> ToolResult:
        """Replace the one exact occurrence of `old`; zero or several matches is an error."""
        bad = self._invalid("edit", _EDIT_CMD, path, (("`old`", old), ("`new`", new)))
        if bad is not None:
            return bad
        if not old:
            return ToolResult(False, "", "edit: `old` must not be empty", 0.0)
        payload = json.dumps({"old": old, "new": new}).encode()
        r = self.resource.run(self.worker, _EDIT_CMD, tool="edit", stdin=payload, args=(path,))
        if r.exit_code == 3:
            n = r.stdout.strip()
            what = "not found" if n == "0" else f"found {n} times (it must be unique; add context)"
            return ToolResult.of(r, f"edit {path}: the old text was {what}")
        return ToolResult.of(r)

    def bash(self, command: str, *, tool: str = "bash") -> ToolResult:
        r = self.resource.run(self.worker, command, tool=tool)
        return ToolResult(
            r.ok,
            r.stdout + (r.stderr if r.stderr else ""),
            None if r.ok else ToolResult.of(r).error,
            r.runtime_s,
            r.killed,
            r.refused,
        )

    def memory(self, text: str) -> ToolResult:
        """Write a note to scratch: free, and allowed outside the window."""
        accepted = self.scratch is not None
        if self.scratch is not None:
            self.scratch.write("note", self.subrun, text)  # its on_write hook records the event
            if self.scratch.on_write is None and self.emit is not None:
                self.emit(ScratchWritten, worker=self.worker, entry="note", text=text)
        elif self.emit is not None:  # memory off: the refused write is still on the record
            self.emit(ScratchWritten, worker=self.worker, entry="note", text=text, accepted=False)
        return ToolResult(accepted, "", None if accepted else "scratch memory is off", 0.0)

    def release(self) -> float:
        """End the window now; returns the seconds used."""
        self.released = True
        return self.resource.close_window(self.worker)

    def request(self, duration: int) -> Request:
        self.pending_request = Request(duration=int(duration))
        return self.pending_request


class WorkspaceEvaluation:
    """`Solver.evaluate` for every real-task solver: score the worker's workspace against the
    task's hidden tests (the evaluator hides the reference); keeps the full evaluation."""

    worker: str
    suite: Suite
    resource: ExecutionResource
    emit: Callable[..., Any] | None
    task_id: str | None
    last_evaluation: Evaluation | None

    async def evaluate(self) -> EvaluationResult:
        assert self.task_id is not None, "start_subrun first"
        ev = evaluate_submission(
            self.suite[self.task_id],
            self.resource.workspace(self.worker),
            worker=self.worker,
            emit=self.emit,
            reference_mode=self.resource.reference_mode,
        )
        self.last_evaluation = ev
        return ev.result

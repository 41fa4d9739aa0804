"""The solver's tools on a real task, backend-agnostic (the oracle now, an LLM tool loop later).

`read`, `write`, `edit` and `bash` all run as commands on the shared resource, so they work only
inside the worker's window, are confined to its sandbox (a symlink to a hidden path leads
nowhere), and are charged to the window by the resource's time model. `memory` writes to the
worker's scratch and is free at any time; `release` ends the window early; `request` records the
window the solver wants next (the arena collects it via the solver's `next_action`).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mbb.agents.base import EvaluationResult
from mbb.events import ScratchWritten
from mbb.resource.resource import CommandResult, ExecutionResource
from mbb.scheduling.actions import Request
from mbb.scratch import Scratch
from mbb.tasks.evaluator import Evaluation, evaluate_submission
from mbb.tasks.suite import Suite

__all__ = ["SolverTools", "ToolResult", "WorkspaceEvaluation"]

_EDIT = r"""
import json, sys
a = json.load(sys.stdin)
try:
    s = open(a["path"], encoding="utf-8", errors="surrogateescape").read()
except OSError as e:
    print(f"cannot read {a['path']}: {e.strerror}", file=sys.stderr); sys.exit(2)
n = s.count(a["old"])
if n != 1:
    print(n); sys.exit(3)
with open(a["path"], "w", encoding="utf-8", errors="surrogateescape") as f:
    f.write(s.replace(a["old"], a["new"], 1))
"""


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
        if r.refused:
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

    def read(self, path: str) -> ToolResult:
        return ToolResult.of(
            self.resource.run(self.worker, f"cat -- {shlex.quote(path)}", tool="read")
        )

    def write(self, path: str, text: str) -> ToolResult:
        q = shlex.quote(path)
        cmd = f'mkdir -p -- "$(dirname -- {q})" && cat > {q}'
        return ToolResult.of(self.resource.run(self.worker, cmd, tool="write", stdin=text.encode()))

    def edit(self, path: str, old: str, new: str) -> ToolResult:
        """Replace the one exact occurrence of `old`; zero or several matches is an error."""
        if not old:
            return ToolResult(False, "", "edit: `old` must not be empty", 0.0)
        payload = json.dumps({"path": path, "old": old, "new": new}).encode()
        cmd = f"/usr/bin/python3 -c {shlex.quote(_EDIT)}  # edit {path}"
        r = self.resource.run(self.worker, cmd, tool="edit", stdin=payload)
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
        )
        self.last_evaluation = ev
        return ev.result

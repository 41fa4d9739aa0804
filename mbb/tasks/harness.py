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

Memory: a note is saved only where the condition keeps notes (`Scratch.accepts("note")`); under
memory off the tool answers that memory is off and the refused write is still an event
(`scratch_written` with `accepted: false`).

Evaluation (`WorkspaceEvaluation`, shared by every real-task solver) runs the hidden tests in a
worker thread (`evaluate_off_loop`), so the event loop and the other seeds on it keep going; the
events it produces are buffered and written on the loop's thread, in order, when it returns.
A solver's `progress` is the share of the hidden tests its workspace passes, measured after
each window in which a command ran (and reused, with its events, by the evaluation after the
subrun when nothing ran since): the same score for every real-task solver.

Completion claims (mbb's choice; the paper is silent): a claim that the task is done is checked
by running the hidden tests, which is not free. It costs window time — `claim_cost_s` (a build
plus one command, 15 s at the default costs) under the modeled clocks, its real running time
under `measured` — and at most `CLAIMS_PER_WINDOW` claim is checked per window; a further claim
in the same window is refused (recorded, nothing run or charged).
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mbb.core.actions import Request
from mbb.core.agent_api import EvaluationResult
from mbb.core.events import ScratchWritten
from mbb.resource.resource import CommandResult, ExecutionResource, ToolCosts, check_argument
from mbb.tasks.evaluator import Evaluation, evaluate_submission
from mbb.tasks.suite import BuiltTask, Suite

if TYPE_CHECKING:
    from mbb.core.scratch import Scratch  # agents' memory, passed in by the protocol

__all__ = [
    "CLAIMS_PER_WINDOW",
    "MEMORY_OFF",
    "Measured",
    "SolverTools",
    "ToolResult",
    "WorkspaceEvaluation",
    "claim_cost_s",
    "evaluate_off_loop",
]

CLAIMS_PER_WINDOW = 1
"""Completion claims checked per window (mbb's choice: one submission check per window)."""

MEMORY_OFF = "memory is off in this condition: the note was not saved"


def claim_cost_s(costs: ToolCosts) -> float:
    """Modeled window seconds of a completion claim: a build plus one command (mbb's choice)."""
    return costs.compile + costs.bash


async def evaluate_off_loop(
    task: BuiltTask,
    workspace: Path,
    *,
    worker: str,
    reference_mode: str,
) -> tuple[Evaluation, list[tuple[tuple[Any, ...], dict[str, Any]]]]:
    """`evaluate_submission` in a worker thread: (the evaluation, the events it produced, as
    (args, kwargs) of `emit` calls in order, for the caller to write on its own thread)."""
    held: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def hold(*args: Any, **kwargs: Any) -> None:
        held.append((args, kwargs))

    ev = await asyncio.to_thread(
        evaluate_submission,
        task,
        workspace,
        worker=worker,
        emit=hold,
        reference_mode=reference_mode,
    )
    return ev, held


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
        self.commands_run = 0  # commands that ran (not refused): what may have changed the work

    def _ran(self, r: CommandResult) -> CommandResult:
        if not r.refused:
            self.commands_run += 1
        return r

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
        r = self._ran(self.resource.run(self.worker, _READ, tool="read", args=(path,)))
        return ToolResult.of(r)

    def write(self, path: str, text: str) -> ToolResult:
        bad = self._invalid("write", _WRITE, path, (("the text", text),))
        if bad is not None:
            return bad
        r = self._ran(
            self.resource.run(self.worker, _WRITE, tool="write", stdin=text.encode(), args=(path,))
        )
        return ToolResult.of(r)

    def edit(self, path: str, old: str, new: str) -> ToolResult:
        """Replace the one exact occurrence of `old`; zero or several matches is an error."""
        bad = self._invalid("edit", _EDIT_CMD, path, (("`old`", old), ("`new`", new)))
        if bad is not None:
            return bad
        if not old:
            return ToolResult(False, "", "edit: `old` must not be empty", 0.0)
        payload = json.dumps({"old": old, "new": new}).encode()
        r = self._ran(
            self.resource.run(self.worker, _EDIT_CMD, tool="edit", stdin=payload, args=(path,))
        )
        if r.exit_code == 3:
            n = r.stdout.strip()
            what = "not found" if n == "0" else f"found {n} times (it must be unique; add context)"
            return ToolResult.of(r, f"edit {path}: the old text was {what}")
        return ToolResult.of(r)

    def bash(self, command: str, *, tool: str = "bash") -> ToolResult:
        r = self._ran(self.resource.run(self.worker, command, tool=tool))
        return ToolResult(
            r.ok,
            r.stdout + (r.stderr if r.stderr else ""),
            None if r.ok else ToolResult.of(r).error,
            r.runtime_s,
            r.killed,
            r.refused,
        )

    def memory(self, text: str) -> ToolResult:
        """Write a note to scratch: free, and allowed outside the window. Where the condition
        keeps no notes (memory off: no scratch, or one that keeps only reports) nothing is
        saved, the answer says memory is off, and the refused write is recorded."""
        accepted = self.scratch is not None and self.scratch.accepts("note")
        if accepted:
            assert self.scratch is not None
            # its on_write hook records the event; `by`: shown as the solver's to its readers
            self.scratch.write("note", self.subrun, text, by="solver")
            if self.scratch.on_write is None and self.emit is not None:
                self.emit(ScratchWritten, worker=self.worker, entry="note", text=text)
        elif self.emit is not None:  # memory off: the refused write is still on the record
            self.emit(ScratchWritten, worker=self.worker, entry="note", text=text, accepted=False)
        return ToolResult(accepted, "", None if accepted else MEMORY_OFF, 0.0)

    def release(self) -> float:
        """End the window now; returns the seconds used."""
        self.released = True
        return self.resource.close_window(self.worker)

    def request(self, duration: int) -> Request:
        self.pending_request = Request(duration=int(duration))
        return self.pending_request


@dataclass(frozen=True, slots=True)
class Measured:
    """One evaluation of a workspace: the state it was taken in (the tools object and its
    command count), the evaluation, and the events it produced (not yet written)."""

    key: tuple[int, int]
    evaluation: Evaluation
    events: list[tuple[tuple[Any, ...], dict[str, Any]]]


class WorkspaceEvaluation:
    """Evaluation for every real-task solver: score the worker's workspace against the task's
    hidden tests (the evaluator hides the reference) off the event loop, keep the full
    evaluation, and measure `progress` (the share of hidden tests passed) after windows.

    A subclass sets `tools` (its `SolverTools`), `measured` (None) and `progress_share` (0.0)
    when a subrun starts."""

    worker: str
    suite: Suite
    resource: ExecutionResource
    emit: Callable[..., Any] | None
    task_id: str | None
    last_evaluation: Evaluation | None
    tools: SolverTools | None
    measured: Measured | None
    progress_share: float

    def _state(self) -> tuple[int, int]:
        t = self.tools
        return (id(t), t.commands_run if t is not None else 0)

    async def _evaluate(self) -> Measured:
        """The workspace's evaluation as it is now (the last one again if no command ran since)."""
        assert self.task_id is not None, "start_subrun first"
        key = self._state()
        if self.measured is not None and self.measured.key == key:
            return self.measured
        ev, held = await evaluate_off_loop(
            self.suite[self.task_id],
            self.resource.workspace(self.worker),
            worker=self.worker,
            reference_mode=self.resource.reference_mode,
        )
        self.measured = Measured(key, ev, held)
        self.progress_share = ev.result.score
        return self.measured

    async def measure_progress(self) -> float:
        """After a window: the share of hidden tests the workspace passes (no event written)."""
        return (await self._evaluate()).evaluation.result.score

    async def evaluate(self) -> EvaluationResult:
        m = await self._evaluate()
        if self.emit is not None:
            for args, kwargs in m.events:
                self.emit(*args, **kwargs)
        self.last_evaluation = m.evaluation
        return m.evaluation.result

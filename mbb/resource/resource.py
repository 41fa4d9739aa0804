"""The ONE shared execution resource: commands run only for the current window holder.

The arena grants windows; the resource enforces them. Each worker owns a workspace (only it is
ever mounted, read-write, at /workspace), its task's reference is bind-mounted execute-only as
./reference and the reference's original on the system path is hidden. Every command — run,
cut off or refused — is a `CommandRun` event. With `reference_mode="broker"`, ./reference is
instead a client of a `ReferenceBroker` that runs the program outside the worker's sandbox, so
not even LD_PRELOAD tricks can read it (see mbb.resource.broker).

Time: with the `virtual` model every tool call costs a fixed, configurable number of seconds, so
the arena's clock stays deterministic; a call that would not fit in what is left of the window
is cut off at the hard end without being started (its partial effects would depend on the
machine). With the `measured` model the wall-clock runtime is charged and a command still
running at the hard end is killed there, with everything it spawned (own pid namespace).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mbb.agents.base import WindowGrant
from mbb.events import CommandRun
from mbb.resource.broker import ReferenceBroker
from mbb.resource.sandbox import (
    SANDBOX_GID,
    SANDBOX_UID,
    WORKSPACE,
    Bind,
    SandboxLimits,
    bwrap_path,
    run_sandboxed,
)

__all__ = ["CommandResult", "ExecutionResource", "TimeModel", "ToolCosts", "hidden_paths"]

TimeModel = Literal["virtual", "measured"]
Emit = Callable[..., Any]
_CMD_MAX = 2000


@dataclass(frozen=True, slots=True)
class ToolCosts:
    """Modeled seconds per tool call (virtual time model); `bash` covers any other command."""

    bash: float = 5.0
    read: float = 1.0
    write: float = 2.0
    edit: float = 2.0
    compile: float = 10.0
    observe: float = 3.0

    def of(self, tool: str) -> float:
        return float(getattr(self, tool, self.bash))


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int | None
    stdout: str
    stderr: str
    runtime_s: float  # charged to the window
    truncated: bool = False
    killed: bool = False
    refused: bool = False
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.killed and not self.refused


def hidden_paths(*originals: str) -> list[str]:
    """The reference's original(s) and what they resolve to: never visible to its worker."""
    paths: list[str] = []
    for original in originals:
        for p in (original, os.path.realpath(original)):
            if p not in paths:
                paths.append(p)
    return paths


def _ensure_placeholder(ws: Path) -> None:
    """Keep ./reference a plain file (the mount point), whatever the worker did to it."""
    ph = ws / "reference"
    if ph.is_symlink() or (ph.exists() and not ph.is_file()):
        if ph.is_dir() and not ph.is_symlink():
            shutil.rmtree(ph)
        else:
            ph.unlink()
    if not ph.exists():
        ph.touch(mode=0o444)


@dataclass
class _Window:
    grant: WindowGrant
    clock_s: float


@dataclass
class ExecutionResource:
    """Serialises execution: one holder at a time, gated by the arena's window grants."""

    root: Path
    emit: Emit | None = None
    time_model: TimeModel = "virtual"
    costs: ToolCosts = field(default_factory=ToolCosts)
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    reference_mode: Literal["exec_only", "broker"] = "exec_only"
    _window: _Window | None = None
    _brokers: dict[str, ReferenceBroker] = field(default_factory=dict)
    _tasks: dict[str, Any] = field(default_factory=dict)  # worker -> BuiltTask

    def __post_init__(self) -> None:
        bwrap_path()  # fail early, naming the install command
        if self.reference_mode not in ("exec_only", "broker"):
            raise ValueError(f"reference_mode must be exec_only or broker: {self.reference_mode!r}")
        if self.time_model not in ("virtual", "measured"):
            raise ValueError(f"time_model must be 'virtual' or 'measured', got {self.time_model!r}")
        self.root = Path(self.root)
        (self.root / "workspaces").mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)

    # --- workspaces ---------------------------------------------------------------------------
    def workspace(self, worker: str) -> Path:
        if not worker or "/" in worker or worker.startswith("."):
            raise ValueError(f"invalid worker id {worker!r}")
        return self.root / "workspaces" / worker

    def assign(self, worker: str, task: Any) -> Path:
        """Give `worker` a fresh workspace for `task` (a BuiltTask): docs + ./reference."""
        ws = self.workspace(worker)
        shutil.rmtree(ws, ignore_errors=True)
        ws.mkdir(parents=True)
        (ws / "docs.txt").write_text(task.docs)
        _ensure_placeholder(ws)  # mount point of the execute-only copy (or broker client)
        if os.geteuid() == 0:
            for p in (ws, ws / "docs.txt"):
                os.lchown(p, SANDBOX_UID, SANDBOX_GID)
        self._tasks[worker] = task
        if self.reference_mode == "broker":
            old = self._brokers.pop(worker, None)
            if old is not None:
                old.close()
            self._brokers[worker] = ReferenceBroker(
                self.root / "broker" / worker,
                task.reference,
                ws,
                hide=hidden_paths(task.original, *task.also_hidden),
            )
        return ws

    def close(self) -> None:
        """Stop the reference brokers (broker mode)."""
        for b in self._brokers.values():
            b.close()
        self._brokers.clear()

    def task_of(self, worker: str) -> Any:
        return self._tasks.get(worker)

    def sandbox_mounts(self, worker: str) -> tuple[list[Bind], list[str]]:
        task = self._tasks.get(worker)
        if task is None:
            return [], []
        hide = hidden_paths(task.original, *task.also_hidden)
        if worker in self._brokers:
            return self._brokers[worker].binds(), hide
        return [Bind(task.reference, f"{WORKSPACE}/reference")], hide

    # --- windows ------------------------------------------------------------------------------
    @property
    def holder(self) -> str | None:
        return self._window.grant.worker if self._window else None

    def open_window(self, grant: WindowGrant) -> None:
        """Make `grant.worker` the holder until `grant.hard_end_s` (idempotent for one grant)."""
        if self._window is not None and self._window.grant == grant:
            return
        if self._window is not None:
            raise RuntimeError(
                f"resource busy: {self._window.grant.worker} holds it; {grant.worker} must wait"
            )
        self._window = _Window(grant, grant.start_s)

    def close_window(self, worker: str) -> float:
        """End `worker`'s window (release or hard end); returns the seconds it used."""
        if self._window is None or self._window.grant.worker != worker:
            return 0.0
        w, self._window = self._window, None
        return min(w.clock_s, w.grant.hard_end_s) - w.grant.start_s

    def now_s(self) -> float | None:
        return self._window.clock_s if self._window else None

    def remaining_s(self, worker: str) -> float:
        if self._window is None or self._window.grant.worker != worker:
            return 0.0
        return max(0.0, self._window.grant.hard_end_s - self._window.clock_s)

    def used_s(self, worker: str) -> float:
        if self._window is None or self._window.grant.worker != worker:
            return 0.0
        return self._window.clock_s - self._window.grant.start_s

    # --- commands -----------------------------------------------------------------------------
    def run(
        self, worker: str, command: str, *, tool: str = "bash", stdin: bytes = b""
    ) -> CommandResult:
        """Run `command` (bash) for `worker` if it holds the resource; else refuse (recorded)."""
        w = self._window
        if w is None or w.grant.worker != worker:
            holder = w.grant.worker if w else None
            return self._refuse(worker, command, tool, f"not_holder (holder: {holder})")
        remaining = w.grant.hard_end_s - w.clock_s
        if remaining <= 0:
            return self._refuse(worker, command, tool, "window_over")
        if self.time_model == "virtual":
            cost = self.costs.of(tool)
            if cost > remaining:  # would still be running at the hard end: cut off unstarted
                res = CommandResult(None, "", "", remaining, killed=True, reason="window_end")
                return self._record(worker, command, tool, res, 0, 0)
            timeout = self.limits.wall_s
        else:
            timeout = remaining
        binds, hide = self.sandbox_mounts(worker)
        ws = self.workspace(worker)
        if not ws.exists():
            return self._refuse(worker, command, tool, "no_workspace")
        _ensure_placeholder(ws)
        sr = run_sandboxed(
            ["/bin/bash", "-c", command],
            workspace=ws,
            stdin=stdin,
            binds=binds,
            hide=hide,
            limits=self.limits,
            timeout_s=timeout,
        )
        if self.time_model == "virtual":
            charged = remaining if sr.killed else self.costs.of(tool)
            reason = "wall_cap" if sr.killed else None
        else:
            charged = remaining if sr.killed else min(sr.wall_s, remaining)
            reason = "window_end" if sr.killed else None
        res = CommandResult(
            sr.exit_code,
            sr.stdout.decode("utf-8", "replace"),
            sr.stderr.decode("utf-8", "replace"),
            charged,
            truncated=sr.truncated,
            killed=sr.killed,
            reason=reason,
        )
        return self._record(worker, command, tool, res, sr.stdout_bytes, sr.stderr_bytes)

    def _refuse(self, worker: str, command: str, tool: str, reason: str) -> CommandResult:
        res = CommandResult(None, "", f"refused: {reason}", 0.0, refused=True, reason=reason)
        return self._record(worker, command, tool, res, 0, 0)

    def _record(
        self, worker: str, command: str, tool: str, res: CommandResult, out_n: int, err_n: int
    ) -> CommandResult:
        w = self._window
        if w is not None and w.grant.worker == worker and not res.refused:
            w.clock_s += res.runtime_s
        if self.emit is not None:
            extra = {"t": w.clock_s} if w is not None else {}
            self.emit(
                CommandRun,
                worker=worker,
                tool=tool,
                command=command[:_CMD_MAX],
                exit_code=res.exit_code,
                runtime=res.runtime_s,
                stdout_bytes=out_n,
                stderr_bytes=err_n,
                truncated=res.truncated,
                killed=res.killed,
                refused=res.refused,
                reason=res.reason,
                **extra,
            )
        return res

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
With the `charged` model commands cost what they cost under `virtual`, and the holder's other
time in the window (an LLM solver's model latency) is charged too, through `charge`.

Each window gets a control group of its own (where the machine allows: mbb.resource.cgroups)
that every command of the window and every reference call the broker serves for it joins;
closing the window kills everything left in it. On a root host each workspace is a tmpfs of
its own with a byte and an inode quota (mbb.resource.fs).

Arguments are checked before anything runs (`check_argument`): a command, an argument or stdin
with a NUL byte, a lone surrogate or past its length is refused with reason
`invalid_arguments: ...`, charged nothing (nothing ran), and returned to the caller like any
other refusal; `run` never raises for what a solver sent. A command that ran is always charged.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mbb.core.agent_api import WindowGrant
from mbb.core.events import CommandRun
from mbb.resource import cgroups, fs
from mbb.resource.broker import ReferenceBroker
from mbb.resource.sandbox import (
    WORKSPACE,
    Bind,
    SandboxLimits,
    bwrap_path,
    claim_uid,
    release_uid,
    run_sandboxed,
)

__all__ = [
    "MAX_ARG_BYTES",
    "MAX_COMMAND_BYTES",
    "CommandResult",
    "ExecutionResource",
    "TimeModel",
    "ToolCosts",
    "check_argument",
    "hidden_paths",
    "printable",
]

TimeModel = Literal["virtual", "measured", "charged"]
Emit = Callable[..., Any]
_CMD_MAX = 2000
MAX_COMMAND_BYTES = 64 << 10  # one command line (the kernel's cap for one argument is 128 KiB)
MAX_ARG_BYTES = 8 << 10  # one positional argument (a path: PATH_MAX is 4 KiB)


def check_argument(value: object, what: str, max_bytes: int) -> str | None:
    """Why `value` cannot be passed to a command (None if it can): not text, a NUL byte, a lone
    surrogate (not UTF-8), or longer than `max_bytes` bytes of UTF-8."""
    if not isinstance(value, str):
        return f"{what} must be text, not {type(value).__name__}"
    if "\0" in value:
        return f"{what} contains a NUL byte"
    try:
        n = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        return f"{what} is not valid UTF-8 (lone surrogate at character {exc.start})"
    if n > max_bytes:
        return f"{what} is {n} bytes long (at most {max_bytes})"
    return None


def printable(text: object) -> str:
    """What an event may hold of a refused argument: no NUL, no lone surrogate."""
    text = text if isinstance(text, str) else repr(text)
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\0", "\\x00")


def _release(mounts: set[Path], groups: list[cgroups.WindowCgroup], uid: list[int]) -> None:
    """What a resource leaves behind if nobody calls close(): run when it is collected and at
    exit (weakref.finalize), so no tmpfs or control group outlives it; its uid is free again."""
    for g in groups:
        with contextlib.suppress(Exception):
            g.close()
    groups.clear()
    for m in sorted(mounts):
        with contextlib.suppress(Exception):
            fs.unmount(m)
    mounts.clear()
    while uid:
        release_uid(uid.pop())


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
            fs.remove_tree(ph)
        else:
            ph.unlink()
    if not ph.exists():
        ph.touch(mode=0o444)


@dataclass
class _Window:
    grant: WindowGrant
    clock_s: float
    cgroup: cgroups.WindowCgroup | None = None


@dataclass(eq=False)  # identity: a live resource sits in a weak set until closed
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
    _mounts: set[Path] = field(default_factory=set)  # workspaces that are tmpfs mounts
    _groups: list[Any] = field(default_factory=list)  # the open window's control group
    _uid: list[int] = field(default_factory=list)  # the run's sandbox uid while claimed

    def __post_init__(self) -> None:
        bwrap_path()  # fail early, naming the install command
        if self.reference_mode not in ("exec_only", "broker"):
            raise ValueError(f"reference_mode must be exec_only or broker: {self.reference_mode!r}")
        if self.time_model not in ("virtual", "measured", "charged"):
            raise ValueError(
                f"time_model must be 'virtual', 'measured' or 'charged', got {self.time_model!r}"
            )
        self.root = Path(self.root)
        (self.root / "workspaces").mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        self.tmpfs = fs.tmpfs_available(self.root)
        self.uid = claim_uid()  # every sandbox of this run (and its reference calls) runs as it
        self._uid.append(self.uid)
        self._finalizer = weakref.finalize(self, _release, self._mounts, self._groups, self._uid)

    def enforcement(self) -> dict[str, str]:
        """What enforces what on this machine (for the run's record and the README's table)."""
        mode, where = cgroups.cgroup_mode()
        return {
            "seccomp": "libseccomp filter via bwrap --seccomp",
            "cgroup": f"{mode} (memory, pids, cpu per window)" if mode else f"none: {where}",
            "workspace_quota": "tmpfs size/nr_inodes" if self.tmpfs else "none (not root)",
        }

    # --- workspaces ---------------------------------------------------------------------------
    def workspace(self, worker: str) -> Path:
        if not worker or "/" in worker or worker.startswith("."):
            raise ValueError(f"invalid worker id {worker!r}")
        return self.root / "workspaces" / worker

    def assign(self, worker: str, task: Any) -> Path:
        """Give `worker` a fresh workspace for `task` (a BuiltTask): docs + ./reference."""
        ws = self.workspace(worker)
        fs.remove_tree(ws)  # a tmpfs is unmounted; a plain tree of any depth removed
        self._mounts.discard(ws)
        ws.mkdir(parents=True)
        if self.tmpfs:
            owner = (self.uid, self.uid) if os.geteuid() == 0 else (0, 0)
            lim = self.limits
            try:
                fs.mount_tmpfs(ws, lim.workspace_bytes, lim.workspace_inodes, *owner)
                self._mounts.add(ws)
            except OSError:  # e.g. a mount table that refuses it here: a plain folder
                pass
        (ws / "docs.txt").write_text(task.docs)
        _ensure_placeholder(ws)  # mount point of the execute-only copy (or broker client)
        if os.geteuid() == 0:
            for p in (ws, ws / "docs.txt"):
                os.lchown(p, self.uid, self.uid)
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
                uid=self.uid,
            )
        return ws

    def close(self) -> None:
        """End the open window (killing what is left in it), stop the reference brokers, and
        unmount the workspaces' tmpfs (their files go with them). Idempotent."""
        self._window = None
        for b in self._brokers.values():
            b.close()
        self._brokers.clear()
        _release(self._mounts, self._groups, self._uid)

    def task_of(self, worker: str) -> Any:
        return self._tasks.get(worker)

    def sandbox_mounts(self, worker: str) -> tuple[list[Bind], list[str]]:
        task = self._tasks.get(worker)
        if task is None:
            return [], []
        hide = hidden_paths(task.original, *task.also_hidden)
        if worker in self._brokers:
            return self._brokers[worker].binds(), hide
        ref = Bind(task.reference, f"{WORKSPACE}/reference", copy=True, perms=0o111)
        return [ref], hide

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
        group = None
        if cgroups.available():
            lim = self.limits
            with contextlib.suppress(OSError):  # a group that cannot be made: rlimits only
                group = cgroups.WindowCgroup(
                    cgroups.CgroupLimits(lim.total_memory_bytes, lim.total_processes, lim.cpus)
                )
        self._window = _Window(grant, grant.start_s, group)
        if group is not None:
            self._groups.append(group)
            group.warm()  # the first command need not join the group itself
        broker = self._brokers.get(grant.worker)
        if broker is not None:
            broker.begin_window(group)

    def close_window(self, worker: str) -> float:
        """End `worker`'s window (release or hard end): its reference calls are stopped and
        everything left in its control group is killed; returns the seconds it used."""
        if self._window is None or self._window.grant.worker != worker:
            return 0.0
        w, self._window = self._window, None
        broker = self._brokers.get(worker)
        if broker is not None:
            broker.end_window()
        if w.cgroup is not None:
            w.cgroup.close()
            with contextlib.suppress(ValueError):
                self._groups.remove(w.cgroup)
        return min(w.clock_s, w.grant.hard_end_s) - w.grant.start_s

    def window_cgroup(self) -> cgroups.WindowCgroup | None:
        return self._window.cgroup if self._window else None

    def charge(self, worker: str, seconds: float) -> float:
        """Advance `worker`'s window clock by `seconds` spent outside commands (`charged` time
        model: the solver's model latency), at most to the hard end; returns what was charged
        (0 if `worker` holds no window)."""
        w = self._window
        if w is None or w.grant.worker != worker or seconds <= 0:
            return 0.0
        spent = max(0.0, min(seconds, w.grant.hard_end_s - w.clock_s))
        w.clock_s += spent
        return spent

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
        self,
        worker: str,
        command: str,
        *,
        tool: str = "bash",
        stdin: bytes = b"",
        args: Sequence[str] = (),
    ) -> CommandResult:
        """Run `command` (bash) for `worker` if it holds the resource; else refuse (recorded).

        `args` become the script's positional parameters ($1, $2, ...): data such as a path
        reaches the command without ever being parsed by the shell."""
        tool = printable(tool)  # a label for the record, never run
        problem = check_argument(command, "the command", MAX_COMMAND_BYTES)
        if isinstance(args, str | bytes) or not isinstance(args, Sequence):
            args, problem = (), problem or "the arguments must be a list of text"
        for i, a in enumerate(args):
            problem = problem or check_argument(a, f"argument {i + 1}", MAX_ARG_BYTES)
        if problem is None and not isinstance(stdin, bytes):
            # a guard for callers the type checker does not see (notebooks, tool loops)
            problem = "stdin must be bytes"  # type: ignore[unreachable]
        elif problem is None and len(stdin) > self.limits.file_bytes:
            problem = f"the input is {len(stdin)} bytes long (at most {self.limits.file_bytes})"
        if isinstance(command, str) and all(isinstance(a, str) for a in args):
            shown = _display(command, args)
        else:
            shown = repr(command)[:_CMD_MAX]
        if problem is not None:
            return self._refuse(worker, shown, tool, f"invalid_arguments: {problem}")
        w = self._window
        if w is None or w.grant.worker != worker:
            holder = w.grant.worker if w else None
            return self._refuse(worker, shown, tool, f"not_holder (holder: {holder})")
        command_line = ["/bin/bash", "-c", command, *(["bash", *args] if args else [])]
        command = shown  # what the events record
        remaining = w.grant.hard_end_s - w.clock_s
        if remaining <= 0:
            return self._refuse(worker, command, tool, "window_over")
        if self.time_model != "measured":
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
        try:
            sr = run_sandboxed(
                command_line,
                workspace=ws,
                stdin=stdin,
                binds=binds,
                hide=hide,
                limits=self.limits,
                timeout_s=timeout,
                cgroup=w.cgroup,
                uid=self.uid,
            )
        except (OSError, ValueError) as exc:  # the sandbox could not start: nothing ran
            return self._refuse(worker, command, tool, f"sandbox_error: {exc}"[:300])
        if self.time_model != "measured":
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

    def refuse_invalid(
        self, worker: str, command: str, tool: str, problem: str, args: Sequence[str] = ()
    ) -> CommandResult:
        """Record a call whose arguments were refused before anything ran (charged nothing)."""
        return self._refuse(worker, _display(command, args), tool, f"invalid_arguments: {problem}")

    def _refuse(self, worker: str, command: str, tool: str, reason: str) -> CommandResult:
        reason = printable(reason)
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
                command=printable(command[:_CMD_MAX]),
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


def _display(command: str, args: Sequence[str]) -> str:
    """The command as recorded: the script, then its positional arguments shell-quoted (shown,
    never executed)."""
    if not args:
        return command
    return f"{command} # args: {shlex.join(str(a) for a in args)}"

"""Score a submission: compile it offline in the sandbox, then run every hidden test against it.

The evaluation works on a copy of the workspace without `./reference`, and the reference's
original on the system path is replaced by an empty, unreadable file, so a submission cannot
delegate to the program it must reconstruct. Each test runs in its own fresh sandbox that sees
only that test's arguments and stdin (never the expected outputs). The executable's hash is
pinned after compiling; if it changes between tests the whole run is refused (score 0). Tests
with no result (timeout, crash, missing executable) count as failures.

The copy (mbb.resource.fs.copy_tree) is iterative and fd-relative, keeps sparse files sparse
and hard links linked, copies only directories, regular files and symlinks, and enforces
`CopyLimits` (depth 64, 4,096 entries, 64 MiB of data, 1 GiB per file, 3,072-byte paths).
Score-0 rule: a workspace over any limit, before or after compiling, is not evaluated; every
hidden test fails with the reason "workspace over limits: ...". Each hidden test gets a fresh
copy of the compiled workspace (its own tmpfs on a root host), so no test sees what another
wrote, and the sandbox looks like a window's: same paths, environment, uid, limits and a
`./reference` file (which does not run).

Time: evaluation runs after the subrun and is not charged to any window; it is capped instead:
compiling at COMPILE_TIMEOUT_S, each test at TEST_TIMEOUT_S and all tests together at
TESTS_BUDGET_S of wall time (a test not started within the budget fails, "evaluation time
budget exhausted"), all of it in one control group (memory, processes, one CPU) that is killed
at the end.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import stat
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mbb.core.agent_api import EvaluationResult
from mbb.core.events import CommandRun, HiddenTestResult
from mbb.resource import cgroups, fs, reaper
from mbb.resource.broker import CLIENT_SOURCE
from mbb.resource.fs import CopyLimits, TreeOverLimits, copy_tree
from mbb.resource.resource import hidden_paths
from mbb.resource.sandbox import (
    DEFAULT_LIMITS,
    WORKSPACE,
    Bind,
    SandboxLimits,
    claim_uid,
    release_uid,
    run_sandboxed,
    uid_range,
)
from mbb.tasks.suite import BuiltTask, HiddenTest

__all__ = [
    "COMPILE_TIMEOUT_S",
    "EVAL_LIMITS",
    "TESTS_BUDGET_S",
    "TEST_TIMEOUT_S",
    "Evaluation",
    "evaluate_reference",
    "evaluate_submission",
]

Emit = Callable[..., Any]
COMPILE_TIMEOUT_S = 60.0
TEST_TIMEOUT_S = 10.0
TESTS_BUDGET_S = 60.0  # all hidden tests of one evaluation together (wall)
EVAL_LIMITS = CopyLimits()


@dataclass(frozen=True, slots=True)
class Evaluation:
    task_id: str
    result: EvaluationResult
    rows: list[dict[str, Any]]  # one per hidden test: test, passed, exit_code, expected_exit, ...
    compiled: bool
    tampered: bool  # the executable changed between tests: the run is refused
    executable_hash: str | None
    wall_s: float
    notes: list[str] = field(default_factory=list)

    def table(self) -> Any:
        """The per-test results as a polars DataFrame."""
        import polars as pl

        return pl.DataFrame(self.rows)


def _hash(path: Path) -> str | None:
    """sha256 of the executable without following links (a link hashes as its target text)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return "link:" + hashlib.sha256(os.readlink(path).encode()).hexdigest()
    if not stat.S_ISREG(st.st_mode):
        return None
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:  # streamed: the size is bounded by EVAL_LIMITS
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class _Scratch:
    """The evaluation's folders: each a tmpfs of the workspace's size on a root host (the
    sandbox then sees the root of a file system, as in a window), else a plain folder."""

    def __init__(self, root: Path | None, limits: SandboxLimits, uid: int) -> None:
        self.base = reaper.temp_dir("eval", root)
        os.chmod(self.base, 0o700)
        self.limits = limits
        self.tmpfs = fs.tmpfs_available(self.base)
        self.mounts: list[Path] = []
        self.lock = threading.Lock()
        self.n = itertools.count()
        root_host = os.geteuid() == 0
        self.owner = (uid, uid) if root_host else None

    def new(self) -> Path:
        d = self.base / f"w{next(self.n)}"
        d.mkdir()
        if self.tmpfs:
            lim, owner = self.limits, self.owner or (os.geteuid(), os.getegid())
            try:
                fs.mount_tmpfs(d, lim.workspace_bytes, lim.workspace_inodes, *owner)
                with self.lock:
                    self.mounts.append(d)
                return d
            except OSError:
                pass  # a plain folder instead
        if self.owner is not None:
            os.chown(d, *self.owner)
        return d

    def drop(self, d: Path) -> None:
        with self.lock:
            if d in self.mounts:
                self.mounts.remove(d)
        fs.remove_tree(d)

    def close(self) -> None:
        for d in list(self.mounts):
            self.drop(d)
        fs.remove_tree(self.base)


def _placeholder(ws: Path, task: BuiltTask, reference_mode: str) -> None:
    """`./reference` as a window shows it: an execute-only file of the reference's size
    (sparse, it does not run), or in broker mode the broker's client (whose socket is absent)."""
    ph = ws / "reference"
    with contextlib.suppress(OSError):
        fs.remove_tree(ph)
        if reference_mode == "broker":
            ph.write_text(CLIENT_SOURCE)
            os.chmod(ph, 0o555)
        else:
            with open(ph, "wb") as f:
                f.truncate(os.stat(task.reference).st_size)
            os.chmod(ph, 0o111)


def _run_tests(
    task: BuiltTask,
    tests: list[HiddenTest],
    fresh: Callable[[], tuple[Path, Callable[[], None]]],
    binds: list[Bind],
    hide: list[str],
    limits: SandboxLimits,
    check: Callable[[Path], bool],
    parallel: int,
    cgroup: cgroups.WindowCgroup | None = None,
    budget_s: float = TESTS_BUDGET_S,
    uid: int | None = None,
) -> tuple[list[dict[str, Any]], bool]:
    """Each test in the fresh workspace `fresh()` gives (and disposes of afterwards); `check`
    says whether that workspace's executable is still the one pinned after compiling."""
    tampered = False
    deadline = time.monotonic() + budget_s

    def one(t: HiddenTest) -> dict[str, Any]:
        nonlocal tampered
        if tampered:
            return _row(t, None, False, "executable changed")
        left = deadline - time.monotonic()
        if left <= 0:
            return _row(t, None, False, "evaluation time budget exhausted")
        try:
            ws, dispose = fresh()
        except (OSError, TreeOverLimits) as exc:
            return _row(t, None, False, f"no workspace for the test: {exc}"[:200])
        try:
            try:
                r = run_sandboxed(
                    [f"{WORKSPACE}/executable", *t.args],
                    workspace=ws,
                    stdin=t.stdin.encode("latin-1"),
                    binds=binds,
                    hide=hide,
                    limits=limits,
                    timeout_s=min(TEST_TIMEOUT_S, left),
                    cgroup=cgroup,
                    uid=uid,
                )
            except (OSError, ValueError) as exc:
                return _row(t, None, False, f"could not run: {exc}"[:200])
            match = r.stdout == t.stdout.encode("latin-1") and not r.truncated
            reason = None
            if r.killed:
                reason = "timeout"
            elif r.exit_code != t.exit_code:
                reason = f"exit {r.exit_code} != {t.exit_code}"
            elif not match:
                reason = "stdout differs"
            if not check(ws):
                tampered = True
                return _row(t, r.exit_code, match, "executable changed")
            return _row(t, r.exit_code, match, reason)
        finally:
            dispose()

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        rows = list(pool.map(one, tests))
    return rows, tampered


def _row(t: HiddenTest, code: int | None, match: bool, reason: str | None) -> dict[str, Any]:
    return {
        "test": t.test_id,
        "passed": reason is None,
        "exit_code": code,
        "expected_exit": t.exit_code,
        "stdout_match": match,
        "reason": reason,
    }


def _finish(
    task: BuiltTask,
    rows: list[dict[str, Any]],
    tampered: bool,
    compiled: bool,
    exe_hash: str | None,
    t0: float,
    notes: list[str],
    worker: str | None,
    emit: Emit | None,
) -> Evaluation:
    total = task.n_tests
    passed = 0 if tampered else sum(1 for r in rows if r["passed"])
    if tampered:
        notes.append("executable changed between tests: run refused, every test failed")
        for r in rows:
            r["passed"] = False
            r["reason"] = r["reason"] or "run refused (executable changed)"
    if emit is not None:
        for r in rows:
            emit(HiddenTestResult, worker=worker, task=task.task_id, **r)
    score = passed / total if total else 0.0
    result = EvaluationResult(score=score, passed=passed, total=total, progress=score)
    return Evaluation(
        task.task_id, result, rows, compiled, tampered, exe_hash, time.monotonic() - t0, notes
    )


def _evaluation_uid(workspace: Path, uid: int | None) -> tuple[int, bool]:
    """(uid, whether claimed here): `uid` if given; else the owner of `workspace` when it is a
    sandbox uid this process claimed (a window's workspace: the evaluation runs as its windows
    did, so the uid does not tell them apart, and it is still no other run's); else a fresh
    claim, so no per-user kernel account is shared with a concurrent run."""
    if uid is not None:
        return uid, False
    with contextlib.suppress(OSError):
        owner = os.lstat(workspace).st_uid
        if owner in uid_range()[1:]:
            return owner, False
    return claim_uid(), True


def evaluate_submission(
    task: BuiltTask,
    workspace: Path,
    *,
    worker: str | None = None,
    emit: Emit | None = None,
    limits: SandboxLimits = DEFAULT_LIMITS,
    scratch_root: Path | None = None,
    parallel: int = 2,
    copy_limits: CopyLimits = EVAL_LIMITS,
    tests_budget_s: float = TESTS_BUDGET_S,
    reference_mode: str = "exec_only",
    uid: int | None = None,
) -> Evaluation:
    """Compile `workspace`'s compile.sh on a copy, then run all hidden tests on ./executable.
    `reference_mode` is the resource's: ./reference then looks as it did in the windows.
    `uid`: who the sandboxes run as (root hosts); default: see `_evaluation_uid`."""
    t0 = time.monotonic()
    tests = task.hidden_tests()
    notes: list[str] = []
    hide = hidden_paths(task.original, *task.also_hidden)
    uid, claimed = _evaluation_uid(workspace, uid)
    try:
        scratch = _Scratch(scratch_root, limits, uid)
    except BaseException:
        if claimed:
            release_uid(uid)
        raise
    group = None
    if cgroups.available():
        with contextlib.suppress(OSError):  # a group that cannot be made: rlimits only
            group = cgroups.WindowCgroup(
                cgroups.CgroupLimits(limits.total_memory_bytes, limits.total_processes, limits.cpus)
            )
            group.warm()

    def refused(why: str) -> Evaluation:
        notes.append(f"workspace over the evaluation limits ({why}): not evaluated, score 0")
        rows = [_row(t, None, False, f"workspace over limits: {why}") for t in tests]
        return _finish(task, rows, False, False, None, t0, notes, worker, emit)

    try:
        ev = scratch.new()
        if workspace.is_dir() and not workspace.is_symlink():
            try:
                copy_tree(workspace, ev, copy_limits, skip_top=("reference",), owner=scratch.owner)
            except TreeOverLimits as exc:
                return refused(str(exc))
            except OSError as exc:  # e.g. the quota of the evaluation's tmpfs
                return refused(f"{exc.strerror or exc}")
        _placeholder(ev, task, reference_mode)
        failed = [_row(t, None, False, "not compiled") for t in tests]
        if not (ev / "compile.sh").is_file() or (ev / "compile.sh").is_symlink():
            notes.append("no compile.sh")
            return _finish(task, failed, False, False, None, t0, notes, worker, emit)
        c = run_sandboxed(
            ["/bin/bash", "compile.sh"],
            workspace=ev,
            hide=hide,
            limits=limits,
            timeout_s=COMPILE_TIMEOUT_S,
            cgroup=group,
            uid=uid,
        )
        if group is not None:
            group.kill()  # nothing compile.sh started survives into the tests
            group.warm()
        if emit is not None:
            emit(
                CommandRun,
                worker=worker,
                tool="compile",
                command="bash compile.sh",
                exit_code=c.exit_code,
                runtime=0.0,  # evaluation is not charged to any window (and stays deterministic)
                stdout_bytes=c.stdout_bytes,
                stderr_bytes=c.stderr_bytes,
                truncated=c.truncated,
                killed=c.killed,
                reason="evaluation",
            )
        try:  # what compiling left must be within the limits too (it is copied per test)
            copy_tree(ev, None, copy_limits, skip_top=("reference",))
        except (TreeOverLimits, OSError) as exc:
            return refused(f"after compiling: {exc}")
        exe_hash = _hash(ev / "executable")
        if c.exit_code != 0 or exe_hash is None:
            notes.append(
                f"compile.sh exit {c.exit_code}; "
                f"executable {'missing' if exe_hash is None else 'ok'}"
                f"; stderr: {c.stderr.decode('utf-8', 'replace')[-500:]}"
            )
        if exe_hash is None:
            return _finish(task, failed, False, False, None, t0, notes, worker, emit)

        def fresh() -> tuple[Path, Callable[[], None]]:
            d = scratch.new()
            try:
                copy_tree(ev, d, copy_limits, skip_top=("reference",), owner=scratch.owner)
                _placeholder(d, task, reference_mode)
            except BaseException:
                scratch.drop(d)
                raise
            return d, lambda: scratch.drop(d)

        rows, tampered = _run_tests(
            task,
            tests,
            fresh,
            [],
            hide,
            limits,
            lambda ws: _hash(ws / "executable") == exe_hash,
            parallel,
            group,
            tests_budget_s,
            uid,
        )
        compiled = c.exit_code == 0
        return _finish(task, rows, tampered, compiled, exe_hash, t0, notes, worker, emit)
    finally:
        if group is not None:
            group.close()
        scratch.close()
        if claimed:
            release_uid(uid)


def evaluate_reference(task: BuiltTask, *, parallel: int = 2) -> Evaluation:
    """Run the hidden tests against the reference itself (it must pass all of them)."""
    t0 = time.monotonic()
    tests = task.hidden_tests()
    uid = claim_uid()
    try:
        with reaper.temp_directory("ref") as d:
            ws = Path(d)
            (ws / "executable").touch()
            binds = [Bind(task.reference, f"{WORKSPACE}/executable")]
            rows, _ = _run_tests(
                task,
                tests,
                lambda: (ws, lambda: None),
                binds,
                [],
                SandboxLimits(),
                lambda _ws: True,
                parallel,
                budget_s=float("inf"),
                uid=uid,
            )
    finally:
        release_uid(uid)
    return _finish(task, rows, False, True, None, t0, [], None, None)

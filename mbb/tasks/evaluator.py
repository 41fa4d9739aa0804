"""Score a submission: compile it offline in the sandbox, then run every hidden test against it.

The evaluation works on a copy of the workspace without `./reference`, and the reference's
original on the system path is replaced by an empty, unreadable file, so a submission cannot
delegate to the program it must reconstruct. Each test runs in its own fresh sandbox that sees
only that test's arguments and stdin (never the expected outputs). The executable's hash is
pinned after compiling; if it changes between tests the whole run is refused (score 0). Tests
with no result (timeout, crash, missing executable) count as failures.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mbb.agents.base import EvaluationResult
from mbb.events import CommandRun, HiddenTestResult
from mbb.resource.resource import hidden_paths
from mbb.resource.sandbox import (
    DEFAULT_LIMITS,
    WORKSPACE,
    Bind,
    SandboxLimits,
    chown_tree,
    run_sandboxed,
)
from mbb.tasks.suite import BuiltTask, HiddenTest

__all__ = ["Evaluation", "evaluate_reference", "evaluate_submission"]

Emit = Callable[..., Any]
COMPILE_TIMEOUT_S = 120.0
TEST_TIMEOUT_S = 10.0


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


def _copy_filter(root: Path) -> Callable[[str, list[str]], list[str]]:
    """Copy only directories, regular files and symlinks (as links); never the reference."""
    top = os.path.normpath(root)

    def ignore(src: str, names: list[str]) -> list[str]:
        skip = []
        for n in names:
            if os.path.normpath(src) == top and n == "reference":
                skip.append(n)
                continue
            mode = os.lstat(os.path.join(src, n)).st_mode
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                skip.append(n)
        return skip

    return ignore


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
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _run_tests(
    task: BuiltTask,
    tests: list[HiddenTest],
    workspace: Path,
    binds: list[Bind],
    hide: list[str],
    limits: SandboxLimits,
    check: Callable[[], bool],
    parallel: int,
) -> tuple[list[dict[str, Any]], bool]:
    tampered = False

    def one(t: HiddenTest) -> dict[str, Any]:
        nonlocal tampered
        if tampered or not check():
            tampered = True
            return _row(t, None, False, "executable changed")
        r = run_sandboxed(
            [f"{WORKSPACE}/executable", *t.args],
            workspace=workspace,
            stdin=t.stdin.encode("latin-1"),
            binds=binds,
            hide=hide,
            limits=limits,
            timeout_s=TEST_TIMEOUT_S,
        )
        match = r.stdout == t.stdout.encode("latin-1") and not r.truncated
        reason = None
        if r.killed:
            reason = "timeout"
        elif r.exit_code != t.exit_code:
            reason = f"exit {r.exit_code} != {t.exit_code}"
        elif not match:
            reason = "stdout differs"
        if not check():
            tampered = True
            return _row(t, r.exit_code, match, "executable changed")
        return _row(t, r.exit_code, match, reason)

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


def evaluate_submission(
    task: BuiltTask,
    workspace: Path,
    *,
    worker: str | None = None,
    emit: Emit | None = None,
    limits: SandboxLimits = DEFAULT_LIMITS,
    scratch_root: Path | None = None,
    parallel: int = 2,
) -> Evaluation:
    """Compile `workspace`'s compile.sh on a copy, then run all hidden tests on ./executable."""
    t0 = time.monotonic()
    tests = task.hidden_tests()
    notes: list[str] = []
    hide = hidden_paths(task.original, *task.also_hidden)
    base = Path(tempfile.mkdtemp(prefix="mbb-eval-", dir=scratch_root))
    try:
        os.chmod(base, 0o700)
        ev = base / "ws"
        if workspace.is_dir():
            shutil.copytree(workspace, ev, symlinks=True, ignore=_copy_filter(workspace))
        else:
            ev.mkdir()
        chown_tree(ev)
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
        )
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
        exe_hash = _hash(ev / "executable")
        if c.exit_code != 0 or exe_hash is None:
            notes.append(
                f"compile.sh exit {c.exit_code}; "
                f"executable {'missing' if exe_hash is None else 'ok'}"
                f"; stderr: {c.stderr.decode('utf-8', 'replace')[-500:]}"
            )
        if exe_hash is None:
            return _finish(task, failed, False, False, None, t0, notes, worker, emit)
        rows, tampered = _run_tests(
            task,
            tests,
            ev,
            [],
            hide,
            limits,
            lambda: _hash(ev / "executable") == exe_hash,
            parallel,
        )
        compiled = c.exit_code == 0
        return _finish(task, rows, tampered, compiled, exe_hash, t0, notes, worker, emit)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def evaluate_reference(task: BuiltTask, *, parallel: int = 2) -> Evaluation:
    """Run the hidden tests against the reference itself (it must pass all of them)."""
    t0 = time.monotonic()
    tests = task.hidden_tests()
    with tempfile.TemporaryDirectory(prefix="mbb-ref-") as d:
        ws = Path(d)
        (ws / "executable").touch()
        binds = [Bind(task.reference, f"{WORKSPACE}/executable")]
        rows, _ = _run_tests(task, tests, ws, binds, [], SandboxLimits(), lambda: True, parallel)
    return _finish(task, rows, False, True, None, t0, [], None, None)

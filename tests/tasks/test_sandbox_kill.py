"""Issue 26, item 6: no mount, control group or process outlives an mbb process killed by
SIGTERM or SIGKILL, and deleting a killed run's folder works (mbb.resource.reaper).

Each test starts a real mbb process, waits until it is mid-window (or mid-evaluation, or
`mbb tasks check` under `timeout`), sees what it holds (tmpfs mounts, control groups, sandboxed
processes, temporary folders), kills it, and looks again: in /proc/self/mountinfo, the cgroup
tree, /proc, the temp dir, and with `rm -rf` of its run folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from mbb.resource import cgroups, reaper
from mbb.resource.sandbox import uid_range

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="tmpfs workspaces need root")
pytestmark = [pytest.mark.slow, needs_root]
T = TypeVar("T")

CHILD = textwrap.dedent(
    """
    import sys, threading, time
    from pathlib import Path
    from mbb.core.agent_api import WindowGrant
    from mbb.resource.resource import ExecutionResource
    from mbb.tasks.evaluator import evaluate_submission
    from mbb.tasks.suite import build_suite

    run, what = Path(sys.argv[1]), sys.argv[2]
    suite = build_suite()
    if what == "evaluation":  # every hidden test sleeps: killed in the middle of one
        sub = run / "submission"
        sub.mkdir(parents=True)
        exe = "printf '#!/bin/sh\\\\nsleep 60\\\\n' > executable; chmod +x executable"
        (sub / "compile.sh").write_text(exe)
        evaluate_submission(suite["rev"], sub)
    else:
        mode = "exec_only" if what == "exit" else what
        res = ExecutionResource(run / "resource", reference_mode=mode)
        res.assign("W1", suite["rev"])
        res.open_window(WindowGrant("W1", 0, 1, 0.0, 10**6, 1e6))
        cmd = "sleep 300 & (./reference < /dev/zero > /dev/null 2>&1 &); sleep 300"
        threading.Thread(target=res.run, args=("W1", cmd), daemon=True).start()
        if what == "exit":  # a normal end: close, then leave
            time.sleep(3)
            res.close()
            sys.exit(0)
    time.sleep(600)
    """
)


def tagged(pid: int) -> dict[str, list[str]]:
    """What process `pid` (alive or not) holds: tmpfs mounts, control groups, temporary
    folders, and processes: its sandboxed ones (a uid of its range), the bwrap processes that
    start them (their command line names that uid) and its reaper."""
    prefix = f"mbb-{pid}-"
    uids = uid_range(pid)
    held: dict[str, list[str]] = {"sandboxed": [], "bwrap": [], "reaper": []}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            uid = p.stat().st_uid
            cmd = (p / "cmdline").read_bytes()
        except OSError:
            continue
        what = f"{p.name} {cmd[:100]!r}"
        if uid in uids:
            held["sandboxed"].append(what)
        elif b"--reuid=" in cmd and int(cmd.split(b"--reuid=")[1].split(b"\0")[0]) in uids:
            held["bwrap"].append(what)
        elif b"reaper.py" in cmd and f"\0{pid}-".encode() in cmd:
            held["reaper"].append(what)
    held["mounts"] = [m.decode() for m, tag in reaper.tagged_mounts() if tag.startswith(f"{pid}-")]
    held["groups"] = [str(g) for d in reaper.cgroup_parents() for g in d.glob(prefix + "*")]
    held["folders"] = [str(f) for f in Path(tempfile.gettempdir()).glob(prefix + "*")]
    return held


def left(pid: int, *, reaper_too: bool = True) -> dict[str, list[str]]:
    held = tagged(pid)
    if not reaper_too:
        del held["reaper"]
    return {k: v for k, v in held.items() if v}


def wait_for(pred: Callable[[], T], timeout_s: float, step: float = 0.1) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = pred()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)


def busy(pid: int) -> bool:
    """Mid-window: a tmpfs mounted and a sandboxed process running."""
    held = tagged(pid)
    return bool(held["mounts"] and held["sandboxed"])


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The processes a test starts: ended whatever happened (by pid; SIGTERM first, which
    `timeout` passes on to its command)."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def start(
    tmp_path: Path, what: str, children: list[subprocess.Popen[bytes]]
) -> tuple[subprocess.Popen[bytes], Path]:
    run = tmp_path / "run"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(run), what])
    children.append(child)
    assert wait_for(lambda: busy(child.pid) or child.poll() is not None, 120), "never started"
    assert child.poll() is None, f"the child ended: {child.returncode}"
    return child, run


def removable(folder: Path) -> bool:
    r = subprocess.run(["rm", "-rf", str(folder)], capture_output=True, text=True)
    return r.returncode == 0 and not folder.exists()


@pytest.mark.parametrize("mode", ["exec_only", "broker"])
def test_sigkill_mid_window_leaves_nothing(tmp_path, mode, children):
    child, run = start(tmp_path, mode, children)
    held = tagged(child.pid)
    assert held["mounts"] and held["sandboxed"] and held["folders"] and held["reaper"], held
    if cgroups.available():
        assert held["groups"], held
    child.kill()
    child.wait()
    assert wait_for(lambda: not left(child.pid), 20), left(child.pid)
    assert removable(run)


@pytest.mark.parametrize("mode", ["exec_only", "broker"])
def test_sigterm_mid_window_cleans_on_the_way_out(tmp_path, mode, children):
    child, run = start(tmp_path, mode, children)
    child.send_signal(signal.SIGTERM)
    assert child.wait(30) == -signal.SIGTERM  # it still dies of the signal
    assert left(child.pid, reaper_too=False) == {}  # at once, not after a while
    assert removable(run)
    assert wait_for(lambda: not left(child.pid), 20), left(child.pid)  # its reaper ends too


def test_sigkill_mid_evaluation_leaves_nothing(tmp_path, children):
    child, run = start(tmp_path, "evaluation", children)
    assert any("eval" in f for f in tagged(child.pid)["folders"])
    child.kill()
    child.wait()
    assert wait_for(lambda: not left(child.pid), 20), left(child.pid)
    assert removable(run)


def test_a_normal_exit_leaves_nothing(tmp_path, children):
    child, run = start(tmp_path, "exit", children)
    assert child.wait(60) == 0
    assert wait_for(lambda: not left(child.pid), 20), left(child.pid)
    assert removable(run)


def _mbb_under(timeout: subprocess.Popen[bytes]) -> int:
    """The pid of the mbb process `timeout` runs, once it holds a sandbox."""

    def child() -> int | None:
        for p in Path("/proc").iterdir():
            if p.name.isdigit():
                try:
                    stat = (p / "stat").read_bytes()
                except OSError:
                    continue
                if int(stat[stat.rindex(b")") + 2 :].split()[1]) == timeout.pid:
                    return int(p.name)
        return None

    pid = wait_for(child, 30)
    assert pid is not None
    assert wait_for(lambda: busy(pid), 180), "mbb tasks check never reached a sandbox"
    return pid


@pytest.mark.parametrize("sig", ["TERM", "KILL"])
def test_mbb_tasks_check_killed_by_timeout_leaves_nothing(tmp_path, sig, children):
    """`timeout -s SIG 600 mbb tasks check`, timed out at once by its SIGALRM (TERM: the
    command cleans up before it dies; KILL: its reaper does, just after)."""
    timeout = subprocess.Popen(
        ["timeout", "-s", sig, "600", sys.executable, "-m", "mbb", "tasks", "check"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    children.append(timeout)
    pid = _mbb_under(timeout)
    os.kill(timeout.pid, signal.SIGALRM)  # what timeout's own timer sends it
    assert timeout.wait(30) in (124, -signal.SIGKILL)  # "timed out" (KILL: its group too)
    if sig == "TERM":
        assert left(pid, reaper_too=False) == {}
    assert wait_for(lambda: not left(pid), 20), left(pid)


def test_leftovers_of_a_dead_reaper_go_at_the_next_start(tmp_path, children):
    """The reaper killed too (say, with its container): the next mbb process's reaper removes
    what the dead one left, and only that."""
    child, run = start(tmp_path, "exec_only", children)
    janitors = tagged(child.pid)["reaper"]
    assert len(janitors) == 1, janitors
    os.kill(int(janitors[0].split()[0]), signal.SIGKILL)
    time.sleep(0.5)
    child.kill()
    child.wait()
    time.sleep(2)
    stuck = left(child.pid)
    assert stuck.get("mounts") and stuck.get("folders"), stuck  # nobody reaped them
    assert not removable(run / "resource" / "workspaces")  # EBUSY, as the issue saw
    live = {m for m in reaper.tagged_mounts() if reaper.alive(m[1])}  # these must stay
    nxt = subprocess.run(
        [sys.executable, "-c", "from mbb.resource import reaper; reaper.watch()"],
        capture_output=True,
        text=True,
    )
    assert nxt.returncode == 0, nxt.stderr
    assert wait_for(lambda: not left(child.pid), 20), left(child.pid)
    assert removable(run)
    assert live <= set(reaper.tagged_mounts())


POOL = textwrap.dedent(
    """
    import concurrent.futures as cf, multiprocessing as mp, sys, threading, time
    from pathlib import Path

    def work(run):
        from mbb.core.agent_api import WindowGrant
        from mbb.resource.resource import ExecutionResource
        from mbb.tasks.suite import build_suite

        res = ExecutionResource(Path(run) / "resource")
        res.assign("W1", build_suite()["rev"])
        res.open_window(WindowGrant("W1", 0, 1, 0.0, 10**6, 1e6))
        threading.Thread(target=res.run, args=("W1", "sleep 300"), daemon=True).start()
        time.sleep(600)

    if __name__ == "__main__":
        from mbb.resource.reaper import die_with_parent

        init = die_with_parent if sys.argv[2] == "yes" else None
        pool = cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"), initializer=init)
        pool.submit(work, sys.argv[1]).result()
    """
)


def _workers(parent: int) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_bytes()
                cmd = (p / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat[stat.rindex(b")") + 2 :].split()[1]) == parent and b"spawn_main" in cmd:
                out.append(int(p.name))
    return out


@pytest.mark.parametrize("wired", ["yes", "no"])
def test_a_pool_worker_dies_with_its_sigkilled_parent(tmp_path, wired, children):
    """A pool's worker holds a window when its parent (`mbb run`) is SIGKILLed: with
    `die_with_parent` as the pool's initializer it goes too, and nothing it held is left;
    without it, it keeps running (what `mbb run` does today: mbb/batch/runner.py)."""
    script = tmp_path / "pool.py"
    script.write_text(POOL)
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path / "run"), wired])
    children.append(parent)
    workers = wait_for(lambda: [w for w in _workers(parent.pid) if busy(w)], 120)
    assert len(workers) == 1, _workers(parent.pid)
    worker = workers[0]
    parent.kill()
    parent.wait()
    if wired == "no":
        time.sleep(2)
        assert Path(f"/proc/{worker}").exists() and left(worker).get("mounts")
        os.kill(worker, signal.SIGTERM)  # the test's own clean-up (its handler reaps)
    assert wait_for(lambda: not Path(f"/proc/{worker}").exists(), 20)
    assert wait_for(lambda: not left(worker), 20), left(worker)
    assert removable(tmp_path / "run")


MOUNTING = textwrap.dedent(
    """
    import itertools, sys, threading, time
    from mbb.resource import fs, reaper

    folder = reaper.temp_dir("eval")  # in the main thread: SIGTERM's handler is in place
    n = itertools.count()

    def mount_forever():  # what an evaluation's test threads do: mount, use, drop; faster
        held = []
        while True:
            d = folder / f"w{next(n)}"
            try:
                d.mkdir()
                fs.mount_tmpfs(d, 1 << 16, 16)
                held.append(d)
            except OSError:
                pass  # the folder was removed under us: the reap is running
            if len(held) > 4:
                fs.remove_tree(held.pop(0))
            time.sleep(0.001)

    for _ in range(4):
        threading.Thread(target=mount_forever, daemon=True).start()
    print("mounting", flush=True)
    while True:  # short sleeps: SIGTERM may land on a mounting thread, and Python runs the
        time.sleep(0.05)  # handler only when the main thread next wakes
    """
)


def test_sigterm_while_threads_mount_leaves_nothing(children):
    """Threads making mounts in a temporary folder when SIGTERM arrives (an evaluation's
    tests, in parallel): the handler's reap sees every mount, and nothing is made after it,
    so nothing is left the instant the process is gone. Without the gate (reaper.making) a
    thread mounts during the handler's `rm -rf` and the folder stays, mounts and all."""
    for _ in range(5):  # each round is one chance for the race
        child = subprocess.Popen(
            [sys.executable, "-c", MOUNTING], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        children.append(child)
        assert child.stdout is not None and child.stdout.readline() == b"mounting\n"
        assert wait_for(lambda c=child: len(tagged(c.pid)["mounts"]) >= 8, 30)  # type: ignore[misc]
        child.send_signal(signal.SIGTERM)
        assert child.wait(30) == -signal.SIGTERM
        assert left(child.pid, reaper_too=False) == {}
        assert wait_for(lambda c=child: not left(c.pid), 20), left(child.pid)  # type: ignore[misc]

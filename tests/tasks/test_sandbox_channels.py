"""Issue 26, item 3: no channel between sandboxes that run at the same time.

Two runs (two ExecutionResources, a window open in each) run a sender and a receiver at once
(tests/tasks/covert.py: every channel an attacker who read the sandbox would try). The sender
sends a 16-bit secret; the receiver must learn nothing: it decodes the same thing when the
sender sends the complement. Each defence is shown to be what stops its channels: with it taken
away (the filter off, one uid for both, the host's device nodes, both programs in one sandbox)
the same programs carry the secret bit for bit.

Two host-wide counters (red team rt37s) are noisy on a shared machine, so they are held to a
weaker bar, which still fails when the channel works: without the filter the secret gets
through in one of three tries, and with it the receiver does no better than chance.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from mbb.core.agent_api import WindowGrant
from mbb.resource import cgroups
from mbb.resource.resource import ExecutionResource
from mbb.resource.sandbox import claim_uid, release_uid, run_sandboxed
from mbb.resource.seccomp import syscall_number
from mbb.tasks.evaluator import evaluate_submission

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="uids, device nodes: root hosts")
pytestmark = [pytest.mark.slow, needs_root]

COVERT = Path(__file__).with_name("covert.py").read_text()
SECRET = "1011001110001011"
FLIPPED = "".join("1" if b == "0" else "0" for b in SECRET)

# channels by the defence that closes them (mbb.resource.seccomp, sandbox, fs; bwrap)
FILTER = ("flock", "posix_lock", "ofd_lock", "inotify", "dnotify", "futex")
# host-wide counters the filter closes at their lever: the TCP socket count in
# /proc/net/sockstat, the disk's read count in /proc/diskstats (O_DIRECT, or fadvise(DONTNEED)
# where O_DIRECT is refused; "fadvise" is that lever alone)
COUNTERS = ("sockstat", "diskstats")
UID = ("pipes", "mqueue", "nproc")
DEVICES = ("devnull_mtime",)
NAMESPACES = (
    "abstract_socket",
    "unix_socket",
    "tcp",
    "files",
    "sysv_ipc",
    "posix_mq",
    "signals",
    "nice",
    "processes",
)
# no defence to take away: read-only mounts, no capabilities, pid and cgroup namespaces
STRUCTURAL = ("atime", "xattr", "hostname", "proc_locks", "cgroup")
ALL = FILTER + UID + DEVICES + NAMESPACES + STRUCTURAL
WITH_CGROUPS = tuple(c for c in ALL if c != "nproc")  # pids.max hides the uid's count
EVALUATED = (*WITH_CGROUPS, "sockstat")  # needs no clock shared with the receiver


def meant(channel: str, secret: str) -> str:
    """What the receiver decodes when the channel works."""
    return {
        "pipes": secret[:3],
        "nproc": secret[:3],
        "mqueue": secret[3:6],
        "devnull_mtime": secret[:6],
        "nice": secret[:4],
        "signals": secret[:8],
        "sockstat": secret[:8],
    }.get(channel, secret)


def agreement(got: str, want: str) -> int:
    return sum(a == b for a, b in zip(got, want, strict=False))


class Run:
    """One run of the arena as the channel sees it: a resource, a worker, an open window."""

    def __init__(self, root: Path, suite: Any, task: str, reference_mode: str = "exec_only"):
        self.res = ExecutionResource(root, reference_mode=reference_mode)  # type: ignore[arg-type]
        self.ws = self.res.assign("W1", suite[task])
        (self.ws / "covert.py").write_text(COVERT)
        self.res.open_window(WindowGrant("W1", 0, 1, 0.0, 10_000, 10_000.0))

    def run(self, cmd: str) -> Any:
        return self.res.run("W1", cmd)

    def close(self) -> None:
        self.res.close()


def at_once(*calls: Callable[[], Any]) -> list[Any]:
    out: list[Any] = [None] * len(calls)

    def one(i: int) -> None:
        out[i] = calls[i]()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def covert(role: str, t0: float, arg: str, channels: tuple[str, ...]) -> str:
    return f"python3 covert.py {role} {t0:.3f} {arg} {','.join(channels)}"


def decoded(stdout: bytes | str, stderr: bytes | str) -> dict[str, str]:
    text = stdout.decode() if isinstance(stdout, bytes) else stdout
    try:
        return json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        err = stderr.decode() if isinstance(stderr, bytes) else stderr
        raise AssertionError(f"the receiver failed: {text!r} {err[-2000:]}") from None


def two_runs(tmp: Path, suite: Any, secret: str, channels: tuple[str, ...]) -> dict[str, str]:
    """The secret from a window of run A to a window of run B, both running at once."""
    a, b = Run(tmp / "a", suite, "rev"), Run(tmp / "b", suite, "tac")
    try:
        t0 = time.time() + 2.0
        _, r = at_once(
            lambda: a.run(covert("send", t0, secret, channels)),
            lambda: b.run(covert("recv", t0, "16", channels)),
        )
        return decoded(r.stdout, r.stderr)
    finally:
        a.close()
        b.close()


def defence_off(tmp: Path, channels: tuple[str, ...]) -> dict[str, str]:
    """Two sandboxes at once with no filter, one uid for both, the host's device nodes."""
    uid = claim_uid()
    wss = []
    for name in ("a", "b"):
        ws = tmp / f"open-{name}"
        ws.mkdir(parents=True)
        (ws / "covert.py").write_text(COVERT)
        os.chown(ws, uid, uid)
        wss.append(ws)
    t0 = time.time() + 2.0

    def box(ws: Path, cmd: str) -> Any:
        return run_sandboxed(["/bin/bash", "-c", cmd], workspace=ws, seccomp=False, uid=uid)

    try:
        with mock.patch("mbb.resource.sandbox.device_nodes", lambda: None):
            _, r = at_once(
                lambda: box(wss[0], covert("send", t0, SECRET, channels)),
                lambda: box(wss[1], covert("recv", t0, "16", channels)),
            )
    finally:
        release_uid(uid)
    return decoded(r.stdout, r.stderr)


def until_carried(tmp: Path, channels: tuple[str, ...], tries: int = 3) -> dict[str, str]:
    """defence_off for noisy channels: the attacker repeats until the secret gets through."""
    for k in range(tries):
        got = defence_off(tmp / f"try-{k}", channels)
        if all(got.get(c) == meant(c, SECRET) for c in channels):
            break
    return got


def one_sandbox(tmp: Path, suite: Any, channels: tuple[str, ...]) -> dict[str, str]:
    """Sender and receiver in one sandbox: what namespaces separate, they share. The filter is
    off (it refuses loopback TCP too)."""
    a = Run(tmp / "one", suite, "rev")
    off = functools.partial(run_sandboxed, seccomp=False)
    try:
        t0 = time.time() + 2.0
        with mock.patch("mbb.resource.resource.run_sandboxed", off):
            r = a.run(
                covert("send", t0, SECRET, channels)
                + " & "
                + covert("recv", t0, "16", channels)
                + "; wait"
            )
        return decoded(r.stdout, r.stderr)
    finally:
        a.close()


@pytest.fixture(scope="module")
def outcomes(suite: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("channels")
    out: dict[str, Any] = {
        "runs": (
            two_runs(tmp / "s", suite, SECRET, WITH_CGROUPS + COUNTERS),
            two_runs(tmp / "f", suite, FLIPPED, WITH_CGROUPS + COUNTERS),
        ),
        "defence_off": {
            **defence_off(tmp / "off", (*FILTER, "pipes", "mqueue", *DEVICES)),
            **defence_off(tmp / "off-nproc", ("nproc",)),  # alone: threads are tasks too
            # alone: no other channel's work in their slots; one counter per call
            **until_carried(tmp / "off-sockstat-disk", COUNTERS),
            **until_carried(tmp / "off-fadvise", ("fadvise",)),
        },
        "one_sandbox": one_sandbox(tmp, suite, NAMESPACES),
    }
    # the per-user process count is a channel only without a control group (pids.max first)
    with mock.patch.object(cgroups, "_mode", (None, "off for this test")):
        out["runs_without_cgroups"] = (
            two_runs(tmp / "ns", suite, SECRET, ("nproc",)),
            two_runs(tmp / "nf", suite, FLIPPED, ("nproc",)),
        )
    return out


@pytest.mark.parametrize("channel", FILTER + UID + DEVICES + COUNTERS + ("fadvise",))
def test_the_channel_carries_the_secret_without_its_defence(outcomes, channel):
    assert outcomes["defence_off"][channel] == meant(channel, SECRET)


@pytest.mark.parametrize("channel", NAMESPACES)
def test_the_channel_carries_the_secret_inside_one_sandbox(outcomes, channel):
    assert outcomes["one_sandbox"][channel] == meant(channel, SECRET)


@pytest.mark.parametrize("channel", WITH_CGROUPS)
def test_no_channel_between_two_runs(outcomes, channel):
    """The receiver decodes the same whatever the secret: it learns nothing."""
    with_secret, with_flipped = (r[channel] for r in outcomes["runs"])
    assert with_secret == with_flipped, (with_secret, with_flipped)
    assert with_secret != meant(channel, SECRET)


@pytest.mark.parametrize("channel", COUNTERS)
def test_no_counter_channel_between_two_runs(outcomes, channel):
    """A host-wide counter moves with other work too, so the receiver may decode noise, but
    it learns nothing: over the secret and its complement, a receiver that decodes the same
    both times agrees on exactly half the bits (a working channel: all of them). A quarter
    more is allowed for noise."""
    with_secret, with_flipped = (r[channel] for r in outcomes["runs"])
    n = len(meant(channel, SECRET))
    score = agreement(with_secret, meant(channel, SECRET))
    score += agreement(with_flipped, meant(channel, FLIPPED))
    assert score <= n + n // 4, (with_secret, with_flipped)


def test_no_process_count_channel_between_two_runs_without_cgroups(outcomes):
    with_secret, with_flipped = (r["nproc"] for r in outcomes["runs_without_cgroups"])
    assert with_secret == with_flipped == "000"


def test_refused_calls_say_why(tmp_path, suite):
    """Each refused call gets the errno of a kernel without the feature, and the tools report
    it plainly; private futexes (threads) and locks' absence leave programs working."""
    a = Run(tmp_path / "e", suite, "rev")
    fcntl_nr, futex, wake = (syscall_number(n) for n in ("fcntl", "futex", "futex_wake"))
    probe = (
        "import ctypes, os, struct\n"
        "l = ctypes.CDLL(None, use_errno=True); l.syscall.restype = ctypes.c_long\n"
        "def sc(*a):\n"
        "    r = l.syscall(*[ctypes.c_long(x) for x in a])\n"
        "    return 0 if r >= 0 else ctypes.get_errno()\n"
        "fd = os.open('/workspace/docs.txt', os.O_RDONLY)\n"
        "lk = ctypes.create_string_buffer(struct.pack('hhqqi4x', 0, 0, 0, 1, 0))\n"
        "w = ctypes.addressof(ctypes.c_uint32(0))\n"
        f"print(sc({syscall_number('flock')}, fd, 2), sc({fcntl_nr}, fd, 6, ctypes.addressof(lk)),"
        f" sc({fcntl_nr}, fd, 37, 0), sc({fcntl_nr}, fd, 1026, 1),"
        f" sc({syscall_number('inotify_init1')}, 0), sc({syscall_number('inotify_init')}),"
        f" sc({futex}, w, 1, 1, 0, 0, 0),"  # FUTEX_WAKE: shared
        f" sc({futex}, w, 129, 1, 0, 0, 0),"  # FUTEX_WAKE_PRIVATE
        f" sc({futex}, w, 1 | (1 << 32), 1, 0, 0, 0),"  # the high half of the register: ignored
        f" sc({wake}, w, 0xFFFFFFFF, 1, 2),"  # futex_wake(2) without FUTEX2_PRIVATE
        f" sc({wake}, w, 0xFFFFFFFF, 1, 130))\n"
    )
    try:
        (a.ws / "probe.py").write_text(probe)
        r = a.run("python3 probe.py")
        assert r.ok, r.stderr
        # ENOLCK x3 (flock, F_SETLK, F_OFD_SETLK), EINVAL (F_NOTIFY), ENOSYS x2, EPERM, a
        # private wake allowed, EPERM for a shared wake hidden in high bits, EPERM, allowed
        assert r.stdout.split() == ["37", "37", "37", "22", "38", "38", "1", "0", "1", "1", "0"]
        r = a.run("exec 9<docs.txt; flock -n 9")
        assert not r.ok and "No locks available" in r.stderr
    finally:
        a.close()


def test_threads_compilers_and_shells_unaffected(tmp_path, suite):
    a = Run(tmp_path / "t", suite, "rev")
    src = (
        "#include <pthread.h>\n#include <stdio.h>\n"
        "static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;\nstatic int n;\n"
        "static void *f(void *a) { for (int i = 0; i < 10000; i++) "
        "{ pthread_mutex_lock(&m); n++; pthread_mutex_unlock(&m); } return a; }\n"
        "int main(void) { pthread_t t[4]; for (int i = 0; i < 4; i++) "
        "pthread_create(&t[i], 0, f, 0); for (int i = 0; i < 4; i++) pthread_join(t[i], 0); "
        'printf("%d\\n", n); return 0; }\n'
    )
    try:
        (a.ws / "t.c").write_text(src)
        r = a.run(
            "gcc -O2 -pthread -o t t.c && ./t && cc -o t2 t.c -lpthread && ./t2 && "
            "python3 -c 'import concurrent.futures as c; "
            "print(sum(c.ThreadPoolExecutor(4).map(abs, range(-100, 0))))' && "
            "sh -c 'echo dash' && seq 100000 | sort -n --parallel=4 -S 1M | tail -1"
        )
        assert r.ok, r.stderr
        assert r.stdout.split() == ["40000", "40000", "5050", "dash", "100000"]
    finally:
        a.close()


def test_the_broker_of_another_run_is_neither_reachable_nor_shared(tmp_path, suite):
    """Run A holds every call its broker allows; run B, at the same time, sees one socket (its
    own), its calls run B's program, and none is refused for A's load."""
    a = Run(tmp_path / "a", suite, "rev", reference_mode="broker")
    b = Run(tmp_path / "b", suite, "tac", reference_mode="broker")
    hold = (  # six stalled calls: four hold A's broker slots, two are refused
        'python3 -c "import socket, time\n'
        "s = [socket.socket(socket.AF_UNIX) for _ in range(6)]\n"
        "[c.connect('/run/mbb-reference.sock') for c in s]; time.sleep(4)\""
    )
    probe = (
        'sleep 1; python3 -c "import os, stat\n'  # stat, not find: a bind hides its type
        "for d, subs, names in os.walk('/'):\n"
        "    subs[:] = [s for s in subs if os.path.join(d, s) not in ('/proc', '/usr')]\n"
        "    for p in (os.path.join(d, n) for n in names):\n"
        '        if stat.S_ISSOCK(os.stat(p).st_mode): print(p)"; '
        "for i in 1 2 3 4; do printf 'a\\nb\\n' | ./reference | tr '\\n' ' '; echo; done"
    )
    try:
        _, r = at_once(lambda: a.run(hold), lambda: b.run(probe))
        lines = r.stdout.splitlines()
        assert lines[0] == "/run/mbb-reference.sock" and lines[1:] == ["b a "] * 4, r.stdout
        assert "too many" not in r.stderr
    finally:
        a.close()
        b.close()


def evaluation_to_window(
    tmp: Path, suite: Any
) -> tuple[dict[str, str], list[dict[str, str]], set[str]]:
    """The attack of the issue: under evaluation in run A, the executable sends the first two
    bytes of its hidden test's input over every channel (held ~2.5 s per test; the TCP socket
    count carries the first byte); a window of run B, at the same time, listens on every
    channel, round after round. Returns what the receiver
    decodes with nobody sending, what it decoded in each round, and the bits each hidden test's
    input would send."""
    task = suite["rev"]
    sub = tmp / "submission"
    sub.mkdir()
    (sub / "covert.py").write_text(COVERT)
    (sub / "compile.sh").write_text("cp send.sh executable && chmod +x executable\n")
    (sub / "send.sh").write_text(
        "#!/bin/bash\n"  # the first two bytes of the test's input (arguments, then stdin)
        "bits=$(python3 -c 'import sys, time\n"
        'd = (" ".join(sys.argv[1:]).encode() + sys.stdin.buffer.read(2))[:2].ljust(2, bytes(1))\n'
        'print(time.time() - 1.1, "".join(format(c, "08b") for c in d))\' "$@")\n'
        f"exec python3 /workspace/covert.py send $bits {','.join(EVALUATED)}\n"
    )
    inputs = set()
    for t in task.hidden_tests():
        d = (" ".join(t.args).encode() + t.stdin.encode("latin-1")[:2])[:2].ljust(2, bytes(1))
        inputs.add("".join(format(c, "08b") for c in d))
    b = Run(tmp / "b", suite, "tac")
    rounds: list[dict[str, str]] = []
    quiet: list[dict[str, str]] = []
    stop = threading.Event()

    def listen(into: list[dict[str, str]], n: int | None = None) -> None:
        while not stop.is_set() and (n is None or len(into) < n):
            t0 = time.time() - 0.2  # watchers set up at once, holds probed 1.3 s later
            r = b.run(covert("recv", t0, "16", EVALUATED))
            into.append(decoded(r.stdout, r.stderr))

    try:
        listen(quiet, 1)  # what the receiver decodes with nobody sending
        listener = threading.Thread(target=listen, args=(rounds,))
        listener.start()
        try:
            ev = evaluate_submission(task, sub, parallel=1, tests_budget_s=12.0)
        finally:
            stop.set()
            listener.join()
        assert ev.compiled and len(rounds) >= 3
        return quiet[0], rounds, inputs
    finally:
        b.close()


def test_an_evaluated_program_cannot_send_its_test_input_to_another_run(tmp_path, suite):
    """The receiver never decodes anything but what it decodes with no sender at all; the
    TCP socket count, which other work on the host moves too, never gives a test's first byte
    (any is 32 or more: 1,024 sockets and up)."""
    quiet, rounds, inputs = evaluation_to_window(tmp_path, suite)
    exact = [(k, r[k]) for r in rounds for k in r if k != "sockstat" and r[k] != quiet[k]]
    assert not exact, exact
    firsts = {i[:8] for i in inputs}
    assert not [r["sockstat"] for r in rounds if r["sockstat"] in firsts]


def test_without_the_filter_the_test_input_reaches_the_other_run(tmp_path, suite):
    """The same attack with the filter off in both runs: the receiver decodes the first bytes
    of hidden test inputs (locks, notifications, futexes, the TCP socket count), so the attack
    above is a real one."""
    off = functools.partial(run_sandboxed, seccomp=False)
    with (
        mock.patch("mbb.resource.resource.run_sandboxed", off),
        mock.patch("mbb.tasks.evaluator.run_sandboxed", off),
    ):
        _, rounds, inputs = evaluation_to_window(tmp_path, suite)
    leaked = {k for r in rounds for k in FILTER if r[k] in inputs}
    firsts = {i[:8] for i in inputs}
    leaked |= {"sockstat" for r in rounds if r["sockstat"] in firsts}
    assert leaked == {*FILTER, "sockstat"}, [r[k] for r in rounds for k in (*FILTER, "sockstat")]


def quiet_files() -> list[str]:
    """16 message catalogues nobody reads here (distinct files, no links)."""
    files: list[str] = []
    inodes: set[int] = set()
    for q in sorted(Path("/usr/share/locale").glob("*/LC_MESSAGES/*.mo"))[100:]:
        st = q.lstat()
        if q.is_file() and not q.is_symlink() and st.st_nlink == 1 and st.st_ino not in inodes:
            files.append(str(q))
            inodes.add(st.st_ino)
        if len(files) == 16:
            break
    return files


def evict(files: list[str]) -> None:
    """Drop the files' pages from the host's page cache (the operator may; root)."""
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def test_known_gap_the_page_cache_of_shared_files(tmp_path, suite):
    """NOT closed (README, "Not closed"): reading a file of /usr puts its pages in the host's
    page cache, which a concurrent sandbox can probe (here with preadv2(RWF_NOWAIT); timing a
    read gives the same). A noisy channel: the attacker gets three tries, as a real one would
    repeat. Kept as a test so that closing it shows up here."""
    send = (
        'python3 -c "import sys\n'
        "for p, b in zip(sys.argv[2:], sys.argv[1]):\n"
        "    if b == '1':\n"
        "        open(p, 'rb').read(1)\" "
    )
    recv = (
        'python3 -c "import os, sys\n'
        "def cached(p):\n"
        "    fd = os.open(p, os.O_RDONLY)\n"
        "    try:\n"
        "        os.preadv(fd, [bytearray(1)], 0, os.RWF_NOWAIT); return '1'\n"
        "    except BlockingIOError:\n"
        "        return '0'\n"
        "    finally:\n"
        "        os.close(fd)\n"
        "print(''.join(cached(p) for p in sys.argv[1:]))\" "
    )
    files = quiet_files()
    quoted = " ".join(shlex.quote(p) for p in files)
    a, b = Run(tmp_path / "a", suite, "rev"), Run(tmp_path / "b", suite, "tac")
    tries = []
    try:
        for _ in range(3):
            evict(files)
            _, r = at_once(
                lambda: a.run(send + SECRET + " " + quoted),
                lambda: (time.sleep(1.5), b.run(recv + quoted))[1],
            )
            tries.append(r.stdout.strip())
            if sum(x == y for x, y in zip(tries[-1], SECRET, strict=True)) >= 14:
                break
        else:
            raise AssertionError(f"the page cache carried no secret (closed?): {tries}")
    finally:
        a.close()
        b.close()

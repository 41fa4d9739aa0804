"""Issue 17, item 1: what the kernel enforces — seccomp, one control group per window, a size-
and inode-limited workspace, no host path inside. Each attack must fail AND be recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mbb.core.agent_api import WindowGrant
from mbb.core.eventlog import EventLog
from mbb.resource import cgroups
from mbb.resource.resource import ExecutionResource
from mbb.resource.sandbox import SandboxLimits, uid_range
from mbb.resource.seccomp import syscall_number

needs_cgroups = pytest.mark.skipif(not cgroups.available(), reason="no cgroup delegation here")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="workspace tmpfs needs root")

# calls syscall argv[1] with integer (or string, as a C string) arguments; prints "rc errno"
PROBE = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def arg(a):
    try:
        return ctypes.c_long(int(a, 0))
    except ValueError:
        return ctypes.c_char_p(a.encode())
rc = libc.syscall(ctypes.c_long(int(sys.argv[1])), *[arg(a) for a in sys.argv[2:]])
print(rc, ctypes.get_errno())
"""


def probe_cmd(name: str, *args: object) -> str:
    nr = syscall_number(name)
    if nr < 0:
        pytest.skip(f"no {name} syscall on this architecture")
    quoted = " ".join(f"'{a}'" for a in args)
    return f"cat > /tmp/p.py <<'X'\n{PROBE}\nX\npython3 /tmp/p.py {nr} {quoted}"


def run(env, cmd, worker="W1", tool="bash"):
    r = env.resource.run(worker, cmd, tool=tool)
    ev = env.last()
    assert ev["kind"] == "command" and ev["worker"] == worker
    return r, ev


@pytest.fixture
def w1(env, suite):
    env.resource.assign("W1", suite["rev"])
    env.grant("W1")
    return env


# --- seccomp ----------------------------------------------------------------------------------
def test_filter_is_loaded_and_no_new_privs(w1):
    r, _ = run(w1, "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status")
    assert "Seccomp:\t2" in r.stdout and "NoNewPrivs:\t1" in r.stdout


# (syscall, arguments): each would succeed or fail with another errno without the filter
DENIED = [
    ("add_key", "user", "mbb-covert", "secret", 6, -4),  # into the uid's user keyring
    ("request_key", "user", "mbb-covert", 0, 0),
    ("keyctl", 0, -4, 1),  # KEYCTL_GET_KEYRING_ID of the user keyring
    ("keyctl", 10, -4, "user", "mbb-covert", 0),  # KEYCTL_SEARCH
    ("unshare", 0x10000000),  # CLONE_NEWUSER
    ("unshare", 0x10020000),  # CLONE_NEWUSER | CLONE_NEWNS
    ("clone", 0x10000011, 0, 0, 0, 0),  # CLONE_NEWUSER | SIGCHLD
    ("setns", 0, 0),
    ("mount", "none", "/tmp", "tmpfs", 0, 0),
    ("umount2", "/tmp", 2),
    ("pivot_root", "/tmp", "/tmp"),
    ("fsopen", "tmpfs", 0),
    ("open_tree", -100, "/tmp", 1),
    ("move_mount", -100, "/tmp", -100, "/mnt", 0),
    ("ptrace", 0, 0, 0, 0),  # PTRACE_TRACEME: allowed to anyone without the filter
    ("process_vm_readv", 1, 0, 0, 0, 0, 0),
    ("bpf", 0, 0, 0),
    ("perf_event_open", 0, 0, -1, -1, 0),
    ("userfaultfd", 0),
    ("io_uring_setup", 1, 0),
    ("kexec_load", 0, 0, 0, 0),
    ("init_module", 0, 0, ""),
    ("finit_module", 0, "", 0),
    ("personality", 0x0400000),  # READ_IMPLIES_EXEC
    ("open_by_handle_at", -100, 0, 0),
    ("kcmp", 1, 1, 0, 0, 0),
    ("chroot", "/tmp"),
    ("swapon", "/tmp/x", 0),
    ("quotactl", 0, 0, 0, 0),
    ("acct", "/tmp/acct"),
    ("socket", 40, 1, 0),  # AF_VSOCK: not namespaced, reaches a VM's host
    ("socket", 38, 5, 0),  # AF_ALG
    ("socket", 21, 5, 0),  # AF_RDS
    ("socket", 30, 2, 0),  # AF_TIPC
    ("socket", 31, 1, 0),  # AF_BLUETOOTH
    ("socket", 3, 5, 0),  # AF_AX25
]


def test_ordinary_sockets_still_work(w1):
    r, _ = run(
        w1,
        "python3 -c 'import socket\nfor f in (1, 16):\n"
        "  socket.socket(f, socket.SOCK_DGRAM if f != 16 else socket.SOCK_RAW).close()\n"
        "a, b = socket.socketpair(); a.send(bytes([120])); print(b.recv(1))'",
    )
    assert r.ok and "b'x'" in r.stdout, r.stderr


# each lever of a host-wide count (seccomp module doc), by raw syscall: prints the errno, or 0
LEVERS = r"""
import ctypes, glob, os
from ctypes import addressof, c_char_p, c_long
l = ctypes.CDLL(None, use_errno=True); l.syscall.restype = c_long
def sc(nr, *a):
    r = l.syscall(c_long(nr), *[c_long(x) if isinstance(x, int) else x for x in a])
    return 0 if r >= 0 else ctypes.get_errno()
NR = dict(arg.split("=") for arg in __import__("sys").argv[1:])
NR = {k: int(v) for k, v in NR.items()}
pair = (ctypes.c_int * 2)()
bash = c_char_p(b"/usr/bin/bash")
fd = os.open("/usr/bin/bash", os.O_RDONLY)
how = (ctypes.c_uint64 * 3)(0, 0, 0)  # struct open_how: O_RDONLY
out = [
    sc(NR["socket"], 2, 1, 0), sc(NR["socket"], 10, 1, 0), sc(NR["socket"], 10, 2, 0),
    sc(NR["socketpair"], 2, 1, 0, addressof(pair)), sc(NR["socketpair"], 10, 2, 0, addressof(pair)),
    sc(NR["openat"], -100, bash, os.O_RDONLY | os.O_DIRECT),
    sc(NR["fcntl"], fd, 4, os.O_DIRECT), sc(NR["fcntl"], fd, 4, os.O_NONBLOCK),
    sc(NR["openat2"], -100, bash, addressof(how), 24),
]
if NR["open"] >= 0:
    out.append(sc(NR["open"], bash, os.O_RDONLY | os.O_DIRECT))
# DONTNEED on a file nobody maps: answered 0, and its pages stay in the page cache
f = max(glob.glob("/usr/share/doc/*/changelog*"), key=os.path.getsize)
fd = os.open(f, os.O_RDONLY)
os.read(fd, 4096)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)  # other advice passes
try:
    os.preadv(fd, [bytearray(1)], 0, os.RWF_NOWAIT)
    out.append("cached")
except BlockingIOError:
    out.append("evicted")
print(*out)
"""


def test_no_tcp_socket_count_nor_disk_reads_on_demand(w1):
    """Red team rt37s: two host-wide counts a sandbox set exactly and another read. TCP
    sockets (/proc/net/sockstat "alloc", not per network namespace): AF_INET/AF_INET6 get
    EAFNOSUPPORT. Disk reads (/proc/diskstats): O_DIRECT gets EINVAL (open, openat,
    fcntl F_SETFL), openat2 ENOSYS, and POSIX_FADV_DONTNEED returns 0 without evicting."""
    names = ("socket", "socketpair", "open", "openat", "fcntl", "openat2")
    nrs = " ".join(f"{n}={syscall_number(n)}" for n in names)
    r, _ = run(w1, f"cat > /tmp/l.py <<'X'\n{LEVERS}\nX\npython3 /tmp/l.py {nrs}")
    assert r.ok, r.stderr
    eaf, einval = "97", "22"
    want = [eaf, eaf, eaf, eaf, eaf, einval, einval, "0", "38"]
    if syscall_number("open") >= 0:
        want.append(einval)
    assert r.stdout.split() == [*want, "cached"], r.stdout
    # programs take their no-network path: hostname, asyncio's self-pipe, subprocesses
    r, _ = run(
        w1,
        "python3 -c 'import asyncio, socket, subprocess\n"
        "async def m():\n"
        '  p = await asyncio.create_subprocess_exec("echo", "hi", stdout=subprocess.PIPE)\n'
        "  return (await p.communicate())[0].decode().strip()\n"
        "print(asyncio.run(m()), socket.gethostname())'; "
        "echo x > /dev/tcp/127.0.0.1/80",
    )
    assert r.stdout.split() == ["hi", "sandbox"], (r.stdout, r.stderr)
    assert "Address family not supported" in r.stderr


def test_open_files_are_limited(w1):
    r, _ = run(w1, "ulimit -Hn")
    assert r.ok and int(r.stdout) == w1.resource.limits.open_files


@pytest.mark.parametrize("call", DENIED, ids=lambda c: f"{c[0]}-{c[1]}")
def test_syscall_denied_with_eperm(w1, call):
    r, _ev = run(w1, probe_cmd(*call))
    assert r.ok, r.stderr  # the probe itself ran: the filter returns an error, it does not kill
    assert r.stdout.split() == ["-1", "1"], r.stdout  # EPERM


def test_clone3_gets_enosys_so_libc_falls_back(w1):
    r, _ = run(w1, probe_cmd("clone3", 0, 0))
    assert r.stdout.split() == ["-1", "38"]
    r, _ = run(w1, "python3 -c 'import subprocess; print(subprocess.run([\"true\"]).returncode)'")
    assert r.ok and r.stdout.strip() == "0"  # ordinary process creation is unaffected


def test_no_host_wide_count_a_sandbox_can_move_and_read(w1):
    """Two host-wide counts every sandbox could read and move, found by a red team: the pty
    count (/proc/sys/kernel/pty/nr: a byte a reading between two runs, and a program under
    evaluation sent its hidden test's input over it; one sandbox could also take every pty) and
    the AIO count (/proc/sys/fs/aio-nr: 16 bits a reading; one sandbox holding aio-max-nr made
    io_setup fail on the whole host). No pty can be opened; io_setup gets ENOSYS."""
    r, _ = run(
        w1,
        "python3 -c 'import os, pty\n"
        'try:\n  pty.openpty(); print("opened")\nexcept OSError as e: print("refused")\n'
        'try:\n  os.open("/dev/ptmx", os.O_RDWR); print("opened")\n'
        "except OSError as e: print(e.errno)\n"
        'print(os.listdir("/dev/pts"))\'',
    )
    assert r.ok and r.stdout.split() == ["refused", "2", "[]"], (r.stdout, r.stderr)
    r, _ = run(w1, probe_cmd("io_setup", 1, 0))
    assert r.stdout.split() == ["-1", "38"], r.stdout  # not 14 (EFAULT): the kernel never saw it


def test_personality_harmless_values_allowed(w1):
    r, _ = run(w1, probe_cmd("personality", 0))
    assert r.stdout.split()[1] == "0"
    r, _ = run(w1, "setarch -R true && echo ok")  # ADDR_NO_RANDOMIZE (e.g. for gdb)
    assert "ok" in r.stdout


def test_keyring_covert_channel_across_workers_and_runs(tmp_path, suite):
    """W1 (run A) hides a secret in the uid's keyring; W2 (run B, later) cannot read it."""
    store = (
        'python3 -c "import ctypes; l=ctypes.CDLL(None,use_errno=True); '
        f"r=l.syscall({syscall_number('add_key')}, b'user', b'mbb-covert', b'leak', 4, -4); "
        'print(r, ctypes.get_errno())"'
    )
    fetch = (
        'python3 -c "import ctypes; l=ctypes.CDLL(None,use_errno=True); '
        f"r=l.syscall({syscall_number('keyctl')}, 10, -4, b'user', b'mbb-covert', 0); "
        'print(r, ctypes.get_errno())"'
    )
    outs = []
    for run_id, (worker, cmd) in enumerate([("W1", store), ("W2", fetch), ("W1", fetch)]):
        log = EventLog(f"r{run_id}", tmp_path / f"r{run_id}" / "events.jsonl")
        res = ExecutionResource(tmp_path / f"r{run_id}" / "res", emit=log.emit)
        res.assign(worker, suite["rev"])
        res.open_window(WindowGrant(worker, 0, 1, 0.0, 100, 100.0))
        outs.append(res.run(worker, cmd).stdout.split())
        res.close()
        log.close()
    assert outs == [["-1", "1"]] * 3
    r = subprocess.run(["cat", "/proc/keys"], capture_output=True, text=True)
    assert "mbb-covert" not in r.stdout


def test_user_namespace_tmpfs_cannot_escape_the_tmp_limit(w1):
    r, ev = run(
        w1,
        "unshare -Urm sh -c 'mount -t tmpfs t /tmp && head -c 100000000 /dev/zero > /tmp/x' "
        '|| python3 -c "import os; os.unshare(os.CLONE_NEWUSER)"',
    )
    assert not r.ok and ev["exit_code"] != 0
    assert "Operation not permitted" in r.stderr or "PermissionError" in r.stderr


def test_ptrace_of_a_sibling_denied(w1):
    r, _ = run(
        w1,
        "sleep 5 & p=$!; sleep 0.2; "
        + probe_cmd("ptrace", 16, "$p", 0, 0).replace("'$p'", "$p")  # PTRACE_ATTACH
        + "; kill $p",
    )
    assert r.stdout.split()[:2] == ["-1", "1"]


# --- one control group per window ------------------------------------------------------------
def _resource(tmp_path, suite, **limits) -> ExecutionResource:
    res = ExecutionResource(tmp_path / "lim", limits=SandboxLimits(**limits))
    res.assign("W1", suite["rev"])
    res.open_window(WindowGrant("W1", 0, 1, 0.0, 1000, 1000.0))
    return res


@needs_cgroups
def test_memory_is_limited_for_the_window_not_per_process(tmp_path, suite):
    """4 processes x 150 MiB resident fit each process's 1 GiB rlimit but not a 256 MiB total."""
    res = _resource(tmp_path, suite, total_memory_bytes=256 << 20)
    hog = 'python3 -c \'import time; x = b"\\x01" * (150 << 20); time.sleep(1.5); print("ok")\''
    r = res.run("W1", f"for i in 1 2 3 4; do {hog} & done; wait")
    assert r.stdout.count("ok") <= 1
    res.close()


@needs_cgroups
def test_processes_are_limited_for_the_window(tmp_path, suite):
    res = _resource(tmp_path, suite, total_processes=24)
    forker = (
        "python3 -c '\nimport os, time\nn = 0\nwhile n < 200:\n  try:\n    pid = os.fork()\n"
        "  except OSError:\n    break\n  if pid == 0:\n    time.sleep(3); os._exit(0)\n"
        "  n += 1\nprint(n)\n'"
    )
    r = res.run("W1", forker)
    assert r.ok and 0 < int(r.stdout.strip()) < 24
    res.close()
    assert _no_sandbox_procs_left()


@needs_cgroups
def test_cpu_bandwidth_is_limited_for_the_window(tmp_path, suite):
    res = _resource(tmp_path, suite, cpus=0.25)
    burn = (
        "python3 -c '\nimport os, time\nfor _ in range(2):\n  if os.fork() == 0:\n"
        "    t = time.time()\n    while time.time() - t < 1.5: pass\n    os._exit(0)\n"
        "os.wait(); os.wait(); t = os.times(); print(t.children_user + t.children_system)\n'"
    )
    r = res.run("W1", burn)
    assert r.ok and float(r.stdout.strip()) < 1.0  # 2 busy processes x 1.5 s, at 0.25 CPU
    res.close()


@needs_cgroups
def test_everything_in_the_window_is_killed_at_its_end(tmp_path, suite):
    res = _resource(tmp_path, suite)
    group = res.window_cgroup()
    assert group is not None
    # a process that escapes the command's pid namespace cannot exist; stand-in: a member of
    # the window's group started from outside (as the broker's calls are)
    join = "".join(f"echo $$ > {f}; " for f in group.procs_files())
    p = subprocess.Popen(["/bin/sh", "-c", join + "exec sleep 60"])
    time.sleep(0.3)
    assert p.pid in group.pids()
    t0 = time.monotonic()
    res.close_window("W1")
    assert p.wait(timeout=5) == -9 and time.monotonic() - t0 < 3
    assert all(not Path(d).exists() for d in group.dirs) or group.closed
    res.close()


def test_without_cgroups_or_tmpfs_the_sandbox_still_works(tmp_path, suite):
    """The stated fallback: rlimits per process only, plain workspace folders."""
    code = f"""
import json, os, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from mbb.core.agent_api import WindowGrant
from mbb.resource.resource import ExecutionResource
from mbb.tasks.suite import Suite
res = ExecutionResource({str(tmp_path / "fb")!r})
class T:  # the minimum of a BuiltTask the resource uses
    docs = "docs"; reference = {str(suite["rev"].reference)!r}
    original = "/usr/bin/rev"; also_hidden = ()
res.assign("W1", T())
res.open_window(WindowGrant("W1", 0, 1, 0.0, 100, 100.0))
r = res.run("W1", "printf abc | ./reference; grep -c Seccomp:.2 /proc/self/status")
print(json.dumps([r.stdout, res.enforcement(), os.path.ismount(res.workspace("W1"))]))
res.close()
"""
    env = {**os.environ, "MBB_CGROUPS": "off", "MBB_WORKSPACE_TMPFS": "off"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    stdout, enforcement, mounted = json.loads(out.stdout.strip().splitlines()[-1])
    assert stdout == "cba1\n"  # the reference ran, and the filter is still there
    assert enforcement["cgroup"].startswith("none") and not mounted


# --- the workspace ----------------------------------------------------------------------------
@needs_root
def test_workspace_byte_quota(w1):
    lim = w1.resource.limits
    r, ev = run(w1, "for i in $(seq 1 20); do head -c 15000000 /dev/zero > f$i || exit 1; done")
    assert not r.ok and "No space left" in r.stderr and ev["exit_code"] != 0
    ws = w1.resource.workspace("W1")
    st = os.statvfs(ws)
    assert (st.f_blocks - st.f_bfree) * st.f_frsize <= lim.workspace_bytes
    assert os.path.ismount(ws)


@needs_root
def test_workspace_inode_quota(w1):
    lim = w1.resource.limits
    r, _ev = run(
        w1,
        'python3 -c \'\nimport os\nos.mkdir("many")\nfor i in range(20000):\n'
        '  open(f"many/{i}", "w").close()\n\'',
    )
    assert not r.ok and "No space left" in r.stderr
    n = len(os.listdir(w1.resource.workspace("W1") / "many"))
    assert n < lim.workspace_inodes


@needs_root
def test_sparse_and_hard_links_cannot_beat_the_quota(w1):
    r, _ = run(
        w1,
        "for i in $(seq 1 40); do truncate -s 15M s$i || exit 1; done; "
        "head -c 1000000 /dev/urandom > one && "
        "for i in $(seq 1 80); do ln one l$i; done && du -sk . | cut -f1",
    )
    assert r.ok and int(r.stdout.strip()) < 4096  # 600 MB apparent, ~1 MB on disk


def test_a_fresh_workspace_per_assignment(w1, suite):
    run(w1, "echo stale > left.txt; mkdir -p d/e/f")
    w1.resource.close_window("W1")
    ws = w1.resource.assign("W1", suite["tac"])
    assert sorted(p.name for p in ws.iterdir()) == ["docs.txt", "reference"]


# --- no host path inside ----------------------------------------------------------------------
def _host_paths(env, suite) -> list[str]:
    res = env.resource
    return [
        str(res.root),
        str(res.workspace("W1")),
        str(suite.cache_dir),
        str(suite["rev"].tests_path),
        str(Path(suite["rev"].reference).parent),
        f"{Path.home()}/",
        str(Path(__file__).resolve().parents[2]),
    ]


LEAKS = (
    "cat /proc/1/cmdline /proc/self/cmdline /proc/1/environ /proc/self/environ "
    "/proc/self/mountinfo /proc/1/mountinfo /proc/self/mounts /proc/self/cgroup "
    "/proc/1/cgroup 2>/dev/null | tr '\\0' '\\n'; ls -la /proc/*/cwd /proc/*/root 2>/dev/null; "
    'printf \'%s\\n\' "$PWD" "$HOME" "$OLDPWD"; readlink /proc/self/cwd'
)


@pytest.mark.parametrize("mode", ["exec_only", "broker"])
def test_no_host_path_visible_inside(tmp_path, suite, mode):
    from conftest import Env

    e = Env(tmp_path / mode)
    e.resource = ExecutionResource(tmp_path / mode / "res", emit=e.log.emit, reference_mode=mode)
    e.resource.assign("W1", suite["rev"])
    e.grant("W1")
    r, _ev = run(e, LEAKS + "; printf 'x\\n' | ./reference > /dev/null; echo rc=$?")
    assert "rc=0" in r.stdout and len(r.stdout) > 500
    for p in _host_paths(e, suite):
        assert p not in r.stdout, p
    e.resource.close()
    e.log.close()


@pytest.mark.skipif(not Path("/usr/bin/gcc").exists(), reason="gcc not installed")
def test_no_host_path_visible_to_a_reference_call(tmp_path, suite):
    """The program the broker runs sees no host path either (it runs a dumper here: the
    reference of the task is replaced by a program that prints what it sees; execute-only,
    so it is compiled, not a script)."""
    from conftest import Env

    src = tmp_path / "dump.c"
    leaks = json.dumps(LEAKS)
    src.write_text(f"#include <stdlib.h>\nint main(void){{return system({leaks});}}\n")
    dumper = tmp_path / "dump"
    subprocess.run(["gcc", "-o", str(dumper), str(src)], check=True)
    task = suite["rev"]

    class T:
        docs, original, also_hidden = task.docs, task.original, task.also_hidden
        reference = dumper

    e = Env(tmp_path / "b")
    e.resource = ExecutionResource(tmp_path / "b" / "res", emit=e.log.emit, reference_mode="broker")
    e.resource.assign("W1", T())
    e.grant("W1")
    r, _ = run(e, "./reference < /dev/null")
    assert r.ok and len(r.stdout) > 200
    for p in [*_host_paths(e, suite), str(tmp_path)]:
        assert p not in r.stdout, p
    e.resource.close()
    e.log.close()


def _sandbox_procs() -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if p.stat().st_uid in uid_range():
                    out.append(int(p.name))
            except OSError:
                pass
    return out


def _no_sandbox_procs_left() -> bool:
    for _ in range(200):
        if not _sandbox_procs():
            return True
        time.sleep(0.1)
    return False


def test_cgroup_v2_layout_written_as_documented(tmp_path, monkeypatch):
    """The v2 branch (not mounted on these machines): a fake hierarchy receives the limits."""
    root = tmp_path / "cg"
    own = root / cgroups._own_path(None).lstrip("/")
    own.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (own / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.subtree_control").write_text("")
    monkeypatch.setattr(cgroups, "_ROOT", root)
    monkeypatch.setattr(cgroups, "_mode", None)
    monkeypatch.delenv("MBB_CGROUPS", raising=False)
    assert cgroups.cgroup_mode() == ("v2", str(own))
    assert set((own / "cgroup.subtree_control").read_text().replace("+", "").split()) == {
        "cpu",
        "memory",
        "pids",
    }
    g = cgroups.WindowCgroup(cgroups.CgroupLimits(300 << 20, 40, 0.5))
    d = g.dirs[0]
    assert (d / "memory.max").read_text() == str(300 << 20)
    assert (d / "memory.swap.max").read_text() == "0"
    assert (d / "pids.max").read_text() == "40"
    assert (d / "cpu.max").read_text() == "50000 100000"
    assert g.procs_files() == [str(d / "cgroup.procs")]
    monkeypatch.setattr(cgroups, "_mode", None)  # the real machine's answer again afterwards


def test_cgroup_v2_without_delegation_falls_back(tmp_path, monkeypatch):
    root = tmp_path / "cg"
    own = root / cgroups._own_path(None).lstrip("/")
    own.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.controllers").write_text("cpu\n")  # memory and pids not delegated
    monkeypatch.setattr(cgroups, "_ROOT", root)
    monkeypatch.setattr(cgroups, "_mode", None)
    monkeypatch.delenv("MBB_CGROUPS", raising=False)
    mode, why = cgroups.cgroup_mode()
    assert mode is None and "memory" in why and not cgroups.available()
    monkeypatch.setattr(cgroups, "_mode", None)


def test_broker_without_cgroups_still_kills_calls_at_the_window_end(tmp_path, suite):
    code = f"""
import json, os, sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from mbb.core.agent_api import WindowGrant
from mbb.resource.resource import ExecutionResource
res = ExecutionResource({str(tmp_path / "fbb")!r}, reference_mode="broker")
class T:
    docs = "docs"; reference = {str(suite["rev"].reference)!r}
    original = "/usr/bin/rev"; also_hidden = ()
res.assign("W1", T())
res.open_window(WindowGrant("W1", 0, 1, 0.0, 100, 100.0))
res.run("W1", "mkfifo f; for i in 1 2 3; do ./reference f > /dev/null 2>&1 & done; sleep 1")
b = res._brokers["W1"]
before = b.running()
res.close_window("W1")
time.sleep(0.5)
print(json.dumps([before, b.running(), res.window_cgroup() is None]))
res.close()
"""
    env = {**os.environ, "MBB_CGROUPS": "off"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    before, after, no_group = json.loads(out.stdout.strip().splitlines()[-1])
    assert before >= 1 and after == 0 and no_group
    assert _no_sandbox_procs_left()


def test_operator_environment_never_inside(w1, monkeypatch):
    """The operator's variables (API keys) are in no process of the sandbox, bwrap's own
    pid-1 reaper included, whether the command came through a trampoline or not."""
    monkeypatch.setenv("MBB_TEST_API_KEY", "sk-operator-secret")
    for _ in range(3):
        r, _ = run(
            w1,
            "for p in /proc/[0-9]*; do cat $p/environ 2>/dev/null | tr '\\0' '\\n'; done; "
            "env; echo done",
        )
        assert "done" in r.stdout and "sk-operator-secret" not in r.stdout


def _server_up(res) -> object:
    group = res.window_cgroup()
    for _ in range(100):
        sp = group.take()
        if sp is not None:
            return sp
        time.sleep(0.05)
    raise AssertionError("the fork server did not come up")


@needs_cgroups
def test_commands_start_in_the_window_group_through_its_fork_server(w1):
    sp = _server_up(w1.resource)
    group = w1.resource.window_cgroup()
    assert sp.server.pid in group.pids() or any(group.pids())
    r, ev = run(w1, "exit 7")
    assert ev["exit_code"] == 7
    r, _ = run(w1, "nice")
    assert r.stdout.strip() == "0"  # the server's own lower priority is not inherited
    r = w1.resource.run("W1", "tr a-z A-Z | sort -u; wc -c < /dev/null", stdin=b"abc\n" * 50000)
    assert r.ok and r.stdout == "ABC\n0\n"
    r = w1.resource.run("W1", "wc -c", stdin=b"x" * (3 << 20))
    assert r.ok and r.stdout.strip() == str(3 << 20)
    r, ev = run(w1, "kill -9 $$")
    assert not r.ok and ev["exit_code"] != 0


@needs_cgroups
def test_a_dead_fork_server_is_replaced(w1):
    sp = _server_up(w1.resource)
    os.kill(sp.server.pid, 9)
    sp.server.wait(timeout=5)
    for _ in range(3):  # falls back to joining the group, restarts the server
        r, _ = run(w1, "echo ok")
        assert r.ok and r.stdout == "ok\n"
    assert _server_up(w1.resource) is not sp


def test_a_group_that_cannot_be_made_leaves_rlimits(tmp_path, suite, monkeypatch):
    def broken(*a, **k):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(cgroups, "WindowCgroup", broken)
    res = _resource(tmp_path, suite)
    assert res.window_cgroup() is None
    assert res.run("W1", "echo ok").stdout == "ok\n"
    res.close()

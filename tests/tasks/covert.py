"""A covert-channel sender and receiver, written by an attacker who has read mbb's sandbox.

Not a test module: tests/tasks/test_sandbox_channels.py copies it into two sandboxes that run
at the same time (two runs) and starts it there with the sandbox's own python3 (stdlib only):

    python3 covert.py send T0 BITS CHANNELS     # BITS: the secret, 16 characters 0/1
    python3 covert.py recv T0 16 CHANNELS       # prints {channel: what it decoded} as JSON

T0 is a wall-clock time both sides share (the clock is the one thing they agree on without a
channel); every step happens at T0 + a fixed offset, so no start-up order is assumed:

    sender:   0.0 hold objects   1.0-1.6 act (open, read, wake, touch, signal)   3.5 exit
    receiver: 0.3 set up watchers and waiters   1.5 probe what the sender holds
              2.6 collect what the watchers saw

Two host-wide counters (red team rt37s) follow their own schedule, in a thread of each side:

    sockstat  the sender holds 32 TCP sockets per unit of the secret's first byte from 0.0 to
              3.5 (in child processes: more than one process may open); the receiver polls
              /proc/net/sockstat ("TCP: ... alloc N") until 2.6 and decodes (highest - lowest)
              / 32. No shared clock needed (an evaluated program uses it alone): a reading
              before the sender starts or after it ends is the baseline.
    diskstats one 0.1 s slot per bit from 1.0 to 2.6: for a 1 the sender makes the host's disk
    fadvise  do 300 reads: O_DIRECT reads ("diskstats", or if O_DIRECT is refused what
              "fadvise" does: posix_fadvise(DONTNEED) then a read of the page, on a file
              nobody maps);
              the receiver counts /proc/diskstats "reads completed" per slot (150 or more: a 1)

A channel decodes to a string: one character per bit ("0", "1", "?" when the probe itself
failed) or, for the counting channels, the number the sender meant, as bits. The tests hold the
receiver to learning nothing: the same output whatever the secret.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import glob
import json
import mmap
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROLE = sys.argv[1]
T0 = float(sys.argv[2])
SECRET = sys.argv[3] if ROLE == "send" else ""
NBITS = len(SECRET) if ROLE == "send" else int(sys.argv[3])
CHANNELS = sys.argv[4].split(",")

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
SYS_futex = 202 if os.uname().machine == "x86_64" else 98  # x86-64, arm64
RTMIN = signal.SIGRTMIN

# Objects both sides name the same way, all outside any workspace: documentation files and
# folders of /usr (nobody else reads them while a test runs), two programs for byte-range locks
DOCS = sorted({os.path.realpath(p) for p in glob.glob("/usr/share/doc/*/copyright")})
LOCKED = DOCS[:16]
WATCHED = [os.path.dirname(p) for p in DOCS[16:32]]
TOUCHED = DOCS[32:48]
POSIX_FILE = os.path.realpath("/usr/bin/bash")
OFD_FILE = os.path.realpath("/usr/bin/dash")
DIRS = ["/", "/tmp", "/var/tmp", "/dev", "/dev/shm", "/run", "/workspace", "/etc", "/root"]
F_OFD_GETLK, F_OFD_SETLK, F_GETPIPE_SZ, F_SETSIG = 36, 37, 1032, 10
DN_ACCESS, DN_MULTISHOT = 1, 0x80000000
IN_OPEN, IN_ACCESS, IN_NONBLOCK = 0x20, 0x01, 0o4000
MQ_PER_QUEUE = (10, 8192)  # the largest queue an unprivileged process may make
SOCK_STEP, SOCK_PER_PROCESS = 32, 2000  # TCP sockets per unit; per process (4,096 open files)
DISK_SLOT, DISK_READS, DISK_THRESHOLD = 0.1, 300, 150


def quiet_big() -> str:
    """A file of /usr nobody maps, 1 MiB or more, for the fadvise sender (its pages can be
    evicted). Looked for only when needed: the search opens the folders inotify watches."""
    docs = glob.glob("/usr/share/doc/*/changelog*")
    return max((p for p in docs if os.path.getsize(p) >= 1 << 20), key=os.path.getsize)


def tcp_alloc() -> int:
    """The host's TCP socket count: not per network namespace."""
    with open("/proc/net/sockstat") as f:
        for line in f:
            if line.startswith("TCP:"):
                fields = line.split()
                return int(fields[fields.index("alloc") + 1])
    return -1


def disk_reads() -> int:
    """Reads completed, summed over the host's block devices (a partition's count is in its
    disk's too: the threshold allows for that)."""
    with open("/proc/diskstats") as f:
        return sum(int(line.split()[3]) for line in f)


def at(offset: float) -> None:
    time.sleep(max(0.0, T0 + offset - time.time()))


def as_bits(value: int, n: int) -> str:
    return format(max(0, min(value, (1 << n) - 1)), f"0{n}b")


def bit(i: int) -> bool:
    return SECRET[i] == "1"


def flock_struct(kind: int, start: int) -> bytes:
    return struct.pack("hhqqi4x", kind, os.SEEK_SET, start, 1, 0)


class MqAttr(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_long),
        ("maxmsg", ctypes.c_long),
        ("msgsize", ctypes.c_long),
        ("curmsgs", ctypes.c_long),
        ("pad", ctypes.c_long * 4),
    ]


def mq_open(name: str, flags: int, maxmsg: int = 1, msgsize: int = 8) -> int:
    attr = MqAttr(0, maxmsg, msgsize, 0)
    fd = libc.mq_open(name.encode(), flags, 0o600, ctypes.byref(attr))
    return int(fd)


def futex_pages() -> list[tuple[int, int]]:
    """(address, value) of the first word of 16 pages of libc, mapped privately and read-only
    here: a non-private futex on such a page is keyed by libc's inode, not by this process."""
    maps = Path("/proc/self/maps").read_text().splitlines()
    path = next(line.split()[-1] for line in maps if "libc.so" in line or "libc-" in line)
    fd = os.open(path, os.O_RDONLY)
    base = libc.mmap(None, 16 * 4096, 1, 2, fd, 0)  # PROT_READ, MAP_PRIVATE
    return [
        (base + i * 4096, ctypes.c_uint32.from_address(base + i * 4096).value) for i in range(16)
    ]


# --- sender -------------------------------------------------------------------------------------
def send() -> None:
    held: list[object] = []
    n = NBITS

    def hold(channel: str, make: Callable[[], object]) -> None:
        if channel in CHANNELS:
            with contextlib.suppress(OSError, ValueError):
                make()

    def locks() -> None:
        for i in range(n):
            if bit(i):
                fd = os.open(LOCKED[i], os.O_RDONLY)
                held.append(fd)
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_SH)

    def byte_locks(path: str, cmd: int) -> None:
        fd = os.open(path, os.O_RDONLY)
        held.append(fd)
        for i in range(n):
            if bit(i):
                with contextlib.suppress(OSError):
                    fcntl.fcntl(fd, cmd, flock_struct(fcntl.F_RDLCK, i))

    def pipes() -> None:  # per-user pipe pages: hold 100 pipes per unit of the value
        for _ in range(100 * int(SECRET[:3], 2)):
            held.append(os.pipe())

    def mqueues() -> None:  # per-user message queue bytes: one large queue per unit
        for k in range(int(SECRET[3:6], 2)):
            fd = mq_open(f"/mbb-hold-{k}", os.O_CREAT | os.O_RDWR, *MQ_PER_QUEUE)
            held.append(fd)

    def nproc() -> None:  # per-user process count: 6 sleeping processes per unit
        for _ in range(6 * int(SECRET[:3], 2)):
            held.append(subprocess.Popen(["/bin/sleep", "4"]))

    def abstract() -> None:
        for i in range(n):
            if bit(i):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.bind(f"\0mbb-covert-{i}".encode())
                s.listen()
                held.append(s)

    def unix_files() -> None:
        for i in range(n):
            if bit(i):
                for d in ("/tmp", "/workspace", "/run", "/dev/shm"):
                    with contextlib.suppress(OSError):
                        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        s.bind(f"{d}/mbb-covert-{i}.sock")
                        s.listen()
                        held.append(s)

    def tcp() -> None:
        for i in range(n):
            if bit(i):
                s = socket.socket()
                s.bind(("127.0.0.1", 47100 + i))
                s.listen()
                held.append(s)

    def files() -> None:
        for d in DIRS:
            for i in range(n):
                if bit(i):
                    with contextlib.suppress(OSError):
                        open(f"{d}/mbb-covert-{i}", "w").close()

    def sysv() -> None:
        for i in range(n):
            if bit(i):
                libc.shmget(0x6D620000 + i, 4096, 0o1000 | 0o666)  # IPC_CREAT
                libc.semget(0x6D630000 + i, 1, 0o1000 | 0o666)
                libc.msgget(0x6D640000 + i, 0o1000 | 0o666)

    def posix_mq() -> None:
        for i in range(n):
            if bit(i):
                held.append(mq_open(f"/mbb-covert-{i}", os.O_CREAT | os.O_RDWR))

    def processes() -> None:
        for i in range(n):
            if bit(i):
                cmd = ["/bin/bash", "-c", "sleep 4; :", f"mbb-covert-proc-{i}"]  # no exec
                held.append(subprocess.Popen(cmd))

    def nice() -> None:  # every process of the uid (that this one can see) gets this nice
        os.setpriority(os.PRIO_USER, os.getuid(), 1 + int(SECRET[:4], 2))

    def xattr() -> None:
        for i in range(n):
            if bit(i):
                for p in (LOCKED[i], "/dev/null"):
                    with contextlib.suppress(OSError):
                        os.setxattr(p, f"user.mbb{i}", b"1")

    def hostname() -> None:
        socket.sethostname("mbb-" + SECRET)

    def sockstat() -> None:  # 32 v TCP sockets from this process's tree in all (tcp's too)
        mine = sum(isinstance(h, socket.socket) and h.family == socket.AF_INET for h in held)
        left = SOCK_STEP * int(SECRET[:8], 2) - mine
        at(0.0)  # the receiver's baseline: before this, or after the exit
        while left > 0:
            k = min(left, SOCK_PER_PROCESS)
            left -= k
            if os.fork() == 0:
                try:
                    socks = [socket.socket() for _ in range(k)]
                except OSError:
                    os._exit(1)
                at(3.5)
                del socks
                os._exit(0)

    hold("flock", locks)
    hold("posix_lock", lambda: byte_locks(POSIX_FILE, fcntl.F_SETLK))
    hold("ofd_lock", lambda: byte_locks(OFD_FILE, F_OFD_SETLK))
    hold("pipes", pipes)
    hold("mqueue", mqueues)
    hold("nproc", nproc)
    hold("abstract_socket", abstract)
    hold("unix_socket", unix_files)
    hold("tcp", tcp)
    hold("files", files)
    hold("sysv_ipc", sysv)
    hold("posix_mq", posix_mq)
    hold("processes", processes)
    hold("nice", nice)
    hold("xattr", xattr)
    hold("hostname", hostname)
    hold("sockstat", sockstat)
    disk = "diskstats" in CHANNELS or "fadvise" in CHANNELS
    disk_pages = [(k * 13 * 4096) % (1 << 20) for k in range(DISK_READS)]
    buf = mmap.mmap(-1, 4096)  # aligned, as O_DIRECT wants
    fd, lever = -1, "fadvise"
    if "diskstats" in CHANNELS:  # O_DIRECT if it may, else what "fadvise" does
        with contextlib.suppress(OSError):
            fd, lever = os.open("/usr/bin/bash", os.O_RDONLY | os.O_DIRECT), "diskstats"
    if disk and fd < 0:  # read the disk_pages once first: only evictions reach the disk
        with contextlib.suppress(OSError, ValueError):
            fd = os.open(quiet_big(), os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no readahead
            for off in disk_pages:
                os.preadv(fd, [buf], off)

    def reads() -> None:
        for i in range(n):
            at(1.0 + i * DISK_SLOT + 0.02)
            if bit(i) and fd >= 0:
                with contextlib.suppress(OSError):
                    for off in disk_pages:
                        if lever == "fadvise":
                            os.posix_fadvise(fd, off, 4096, os.POSIX_FADV_DONTNEED)
                        os.preadv(fd, [buf], off)

    at(1.0)
    acts = []
    if disk:
        acts.append(threading.Thread(target=reads))
    if "futex" in CHANNELS:
        pages = futex_pages()

        def wake() -> None:
            while time.time() < T0 + 1.6:
                for i, (addr, _) in enumerate(pages):
                    if bit(i):
                        libc.syscall(SYS_futex, ctypes.c_void_p(addr), 1, 1 << 30, None, None, 0)
                time.sleep(0.005)

        acts.append(threading.Thread(target=wake))
    if "devnull_mtime" in CHANNELS:

        def touch() -> None:  # the value is the moment of the touch, in 20 ms slots
            at(1.0 + 0.02 * int(SECRET[:6], 2))
            with contextlib.suppress(OSError):
                os.utime("/dev/null")

        acts.append(threading.Thread(target=touch))
    for t in acts:
        t.start()
    if "inotify" in CHANNELS or "dnotify" in CHANNELS:
        for i in range(n):
            if bit(i):
                with contextlib.suppress(OSError):
                    os.listdir(WATCHED[i])
                    with open(os.path.join(WATCHED[i], "copyright"), "rb") as f:
                        f.read(1)
    if "atime" in CHANNELS:
        for i in range(n):
            if bit(i):
                with contextlib.suppress(OSError):
                    with open(TOUCHED[i], "rb") as f:
                        f.read()
                    os.utime(TOUCHED[i])
    if "signals" in CHANNELS:  # the receiver's pids, if this sandbox can see them
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) != os.getpid():
                with contextlib.suppress(OSError):
                    with open(f"/proc/{p}/cmdline", "rb") as f:
                        if b"covert.py\0recv" not in f.read():
                            continue
                    for i in range(8):
                        if bit(i):
                            os.kill(int(p), RTMIN + 16 + i)
    for t in acts:
        t.join()
    at(3.5)


# --- receiver ------------------------------------------------------------------------------------
def recv() -> dict[str, str]:
    n = NBITS
    out: dict[str, str] = {}
    want = set(CHANNELS)
    sigs = [RTMIN + i for i in range(16)] + [RTMIN + 16 + i for i in range(8)]
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)  # queued, read at the end

    # sockstat: poll the count from now until 2.6, leaving out readings taken while this
    # receiver's own TCP probe (the "tcp" channel) holds sockets
    own_tcp = [0]  # odd while the probe runs
    counts: list[int] = []

    def poll_sockstat() -> None:
        while time.time() < T0 + 2.6:
            g = own_tcp[0]
            c = tcp_alloc()
            if g == own_tcp[0] and g % 2 == 0:
                counts.append(c)
            time.sleep(0.02)

    per_slot: list[int] = []

    def count_disk_reads() -> None:
        at(1.0)
        last = disk_reads()
        for i in range(n):
            at(1.0 + (i + 1) * DISK_SLOT - 0.005)
            now = disk_reads()
            per_slot.append(now - last)
            last = now

    pollers = []
    if "sockstat" in want:
        pollers.append(threading.Thread(target=poll_sockstat))
    if "diskstats" in want or "fadvise" in want:
        pollers.append(threading.Thread(target=count_disk_reads))
    for t in pollers:
        t.start()

    at(0.3)
    if "dnotify" in want:
        dn_ok = []
        for i, d in enumerate(WATCHED):
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.fcntl(fd, F_SETSIG, RTMIN + i)
                fcntl.fcntl(fd, fcntl.F_NOTIFY, DN_ACCESS | DN_MULTISHOT)
                dn_ok.append(True)
            except OSError:
                dn_ok.append(False)
    ino = -1
    if "inotify" in want:
        ino = libc.inotify_init1(IN_NONBLOCK)
        wds = {}
        if ino >= 0:
            for i, d in enumerate(WATCHED):
                wds[libc.inotify_add_watch(ino, d.encode(), IN_OPEN | IN_ACCESS)] = i
    woken = ["?"] * n
    waiters = []
    if "futex" in want:
        pages = futex_pages()

        class Timespec(ctypes.Structure):
            _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]

        def wait(i: int) -> None:
            addr, value = pages[i]
            left = T0 + 2.5 - time.time()
            ts = Timespec(int(left), int((left % 1) * 1e9))
            r = libc.syscall(SYS_futex, ctypes.c_void_p(addr), 0, value, ctypes.byref(ts), 0, 0)
            e = ctypes.get_errno()
            woken[i] = "1" if r == 0 else "0" if e == errno.ETIMEDOUT else "?"

        waiters = [threading.Thread(target=wait, args=(i,)) for i in range(n)]
        for t in waiters:
            t.start()

    at(1.5)
    if "flock" in want:
        s = ""
        for p in LOCKED[:n]:
            fd = os.open(p, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                s += "0"
            except BlockingIOError:
                s += "1"
            except OSError:
                s += "?"
            os.close(fd)
        out["flock"] = s
    for name, path, cmd in (
        ("posix_lock", POSIX_FILE, fcntl.F_GETLK),
        ("ofd_lock", OFD_FILE, F_OFD_GETLK),
    ):
        if name in want:
            fd, s = os.open(path, os.O_RDONLY), ""
            for i in range(n):
                try:
                    r = fcntl.fcntl(fd, cmd, flock_struct(fcntl.F_WRLCK, i))
                    s += "0" if struct.unpack("hhqqi4x", r)[0] == fcntl.F_UNLCK else "1"
                except OSError:
                    s += "?"
            out[name] = s
    if "pipes" in want:  # how many full-size pipes are left of the uid's 1,024
        made, left = [], 0
        while left < 1100:
            r, w = os.pipe()
            made.append((r, w))
            if fcntl.fcntl(w, F_GETPIPE_SZ) < 65536:
                break
            left += 1
        for r, w in made:
            os.close(r)
            os.close(w)
        out["pipes"] = as_bits(round((1024 - left) / 100), 3)
    if "mqueue" in want:  # how many large queues fit in what the uid has left (9 when none)
        fds = []
        while len(fds) < 12:
            fd = mq_open(f"/mbb-probe-{len(fds)}", os.O_CREAT | os.O_RDWR, *MQ_PER_QUEUE)
            if fd < 0:
                break
            fds.append(fd)
        out["mqueue"] = as_bits(9 - len(fds), 3)
    if "nproc" in want:  # how many more tasks this uid may start (64 in all, no cgroup)
        own = sum(
            len(os.listdir(f"/proc/{p}/task"))
            for p in os.listdir("/proc")
            if p.isdigit() and os.stat(f"/proc/{p}").st_uid == os.getuid()
        )
        kids = []
        with contextlib.suppress(OSError):
            while len(kids) < 80:
                kids.append(subprocess.Popen(["/bin/sleep", "3"]))
        for k in kids:
            k.kill()
        out["nproc"] = as_bits(round((64 - 1 - own - len(kids)) / 6), 3)  # the sender: 1 + 6v
    if "abstract_socket" in want:
        s = ""
        for i in range(n):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                c.connect(f"\0mbb-covert-{i}".encode())
                s += "1"
            except ConnectionRefusedError:
                s += "0"
            except OSError:
                s += "?"
            c.close()
        out["abstract_socket"] = s
    if "unix_socket" in want:
        s = ""
        for i in range(n):
            found = "0"
            for d in ("/tmp", "/workspace", "/run", "/dev/shm"):
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                with contextlib.suppress(OSError):
                    c.connect(f"{d}/mbb-covert-{i}.sock")
                    found = "1"
                c.close()
            s += found
        out["unix_socket"] = s
    if "tcp" in want:
        s = ""
        own_tcp[0] += 1
        for i in range(n):
            try:
                c = socket.socket()
            except OSError:  # no AF_INET at all (the filter)
                s += "?"
                continue
            c.settimeout(0.5)
            try:
                c.connect(("127.0.0.1", 47100 + i))
                s += "1"
            except ConnectionRefusedError:
                s += "0"
            except OSError:
                s += "?"
            c.close()
        own_tcp[0] += 1
        out["tcp"] = s
    if "files" in want:
        seen = set()
        for d in DIRS:
            with contextlib.suppress(OSError):
                seen.update(os.listdir(d))
        out["files"] = "".join("1" if f"mbb-covert-{i}" in seen else "0" for i in range(n))
    if "sysv_ipc" in want:
        s = ""
        for i in range(n):
            found = (
                libc.shmget(0x6D620000 + i, 0, 0) >= 0
                or libc.semget(0x6D630000 + i, 0, 0) >= 0
                or libc.msgget(0x6D640000 + i, 0) >= 0
            )
            s += "1" if found else "0"
        out["sysv_ipc"] = s
    if "posix_mq" in want:
        s = ""
        for i in range(n):
            fd = mq_open(f"/mbb-covert-{i}", os.O_RDONLY)
            s += "1" if fd >= 0 else "0" if ctypes.get_errno() == errno.ENOENT else "?"
        out["posix_mq"] = s
    if "processes" in want:
        seen = set()
        for p in os.listdir("/proc"):
            if p.isdigit():
                with contextlib.suppress(OSError), open(f"/proc/{p}/cmdline", "rb") as f:
                    seen.update(f.read().split(b"\0"))
        out["processes"] = "".join(
            "1" if f"mbb-covert-proc-{i}".encode() in seen else "0" for i in range(n)
        )
    if "nice" in want:
        out["nice"] = as_bits(os.getpriority(os.PRIO_PROCESS, 0) - 1, 4)
    if "xattr" in want:
        s = ""
        for i in range(n):
            found = "0"
            for p in (LOCKED[i], "/dev/null"):
                with contextlib.suppress(OSError):
                    os.getxattr(p, f"user.mbb{i}")
                    found = "1"
            s += found
        out["xattr"] = s
    if "hostname" in want:
        h = socket.gethostname()
        out["hostname"] = h[4:] if h.startswith("mbb-") else f"({h})"
    if "proc_locks" in want:  # locks held on the shared files, as the kernel lists them
        inodes = {os.stat(p).st_ino: i for i, p in enumerate(LOCKED[:n])}
        marks = ["0"] * n
        with open("/proc/locks") as f:
            for line in f:
                fields = line.split()
                inode = int(fields[5].split(":")[-1]) if len(fields) > 5 else -1
                if inode in inodes:
                    marks[inodes[inode]] = "1"
        out["proc_locks"] = "".join(marks)
    if "cgroup" in want:  # what of the control groups a sandbox can see at all
        seen_cg = [Path("/proc/self/cgroup").read_text(), Path("/proc/1/cgroup").read_text()]
        for p in ("/sys/fs/cgroup", "/sys"):
            try:
                seen_cg.append(" ".join(sorted(os.listdir(p))))
            except OSError as exc:
                seen_cg.append(type(exc).__name__)
        out["cgroup"] = "|".join(seen_cg).replace("\n", ";")

    at(2.6)
    for t in pollers:
        t.join()
    if "sockstat" in want:
        v = round((max(counts) - min(counts)) / SOCK_STEP) if counts else 0
        out["sockstat"] = as_bits(v, 8)
    for c in ("diskstats", "fadvise"):
        if c in want:
            out[c] = "".join("1" if d >= DISK_THRESHOLD else "0" for d in per_slot)
    if "sockstat" in want or "diskstats" in want or "fadvise" in want:
        print(json.dumps({"sockstat": counts[::10], "disk": per_slot}), file=sys.stderr)
    if "inotify" in want:
        marks = ["?"] * n
        if ino >= 0:
            marks = ["0"] * n
            with contextlib.suppress(BlockingIOError):
                data = os.read(ino, 1 << 16)
                while data:
                    wd, _, _, size = struct.unpack("iIII", data[:16])
                    if wd in wds:
                        marks[wds[wd]] = "1"
                    data = data[16 + size :]
        out["inotify"] = "".join(marks)
    pending = signal.sigpending()
    if "dnotify" in want:
        out["dnotify"] = "".join(
            "?" if not dn_ok[i] else "1" if RTMIN + i in pending else "0" for i in range(n)
        )
    if "signals" in want:
        out["signals"] = "".join("1" if RTMIN + 16 + i in pending else "0" for i in range(8))
    if "futex" in want:
        for t in waiters:
            t.join()
        out["futex"] = "".join(woken)
    if "devnull_mtime" in want:
        late = os.stat("/dev/null").st_mtime - (T0 + 1.0)
        out["devnull_mtime"] = as_bits(round(late / 0.02), 6) if 0 <= late < 1.3 else "none"
    if "atime" in want:
        out["atime"] = "".join(
            "1" if max(os.stat(p).st_atime, os.stat(p).st_mtime) > T0 else "0" for p in TOUCHED[:n]
        )
    return out


if __name__ == "__main__":
    if ROLE == "send":
        send()
    else:
        print(json.dumps(recv()))

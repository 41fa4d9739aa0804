"""Workspace file systems: size- and inode-limited tmpfs mounts, a bounded copy, deep removal.

- `mount_tmpfs`: when the host runs as root, each workspace (and each hidden test's fresh copy)
  is its own tmpfs with `size=` and `nr_inodes=`: the kernel refuses the byte or file past the
  quota, and the sandbox sees the root of a file system (no host path in its mountinfo).
  Without root, workspaces are plain directories (README: no byte or inode quota then).
- `copy_tree`: an iterative, fd-relative walk (no recursion, no path resolution through links,
  so a 1,200-deep tree or a directory swapped for a symlink cannot derail it) that keeps
  sparseness (SEEK_DATA/SEEK_HOLE) and hard links, copies only directories, regular files and
  symlinks (as links), and stops with `TreeOverLimits` past a depth, entry, byte or path-length
  limit: the evaluator's score-0 rule.
- `remove_tree`: unmounts a workspace's tmpfs or removes a plain tree of any depth (`rm -rf`,
  which walks without recursion limits); never raises for a tree it cannot fully remove.
- `device_nodes`: the character devices every sandbox's /dev shows (null, zero, full, random,
  urandom, tty), made by this process on a tmpfs of its own that is then remounted read-only.
  bwrap's `--dev` binds the host's nodes, writable: any sandbox could set the times of the
  host's /dev/null (utimensat needs only write permission, and /dev/null is 0666), and another
  read them back, a channel with the precision of a clock. Here `touch /dev/null` gets EROFS,
  while reading and writing the devices works as before (the kernel checks a read-only mount
  only for regular files, directories and links). Root hosts only: without CAP_MKNOD the
  sandbox keeps bwrap's binds and that channel (README, "Not closed").
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import errno
import os
import stat
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from mbb.resource import reaper

__all__ = [
    "CopyLimits",
    "TreeOverLimits",
    "TreeStats",
    "copy_tree",
    "device_nodes",
    "mount_tmpfs",
    "remove_tree",
    "tmpfs_available",
    "unmount",
]

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT = 1, 2, 4, 8, 32
_MNT_DETACH = 2
# (name, major, minor): what bwrap's --dev shows, /dev/tty included (ENXIO without a terminal)
DEVICES: tuple[tuple[str, int, int], ...] = (
    ("null", 1, 3),
    ("zero", 1, 5),
    ("full", 1, 7),
    ("random", 1, 8),
    ("urandom", 1, 9),
    ("tty", 5, 0),
)
_libc: ctypes.CDLL | None = None
_lock = threading.Lock()
_tmpfs_ok: bool | None = None


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


def _mount(path: Path, flags: int, opts: str) -> None:
    """A tmpfs whose source names this process (mbb.resource.reaper detaches it if we die)."""
    with reaper.making() as tag:
        rc = _c().mount(f"mbb-{tag}".encode(), os.fsencode(path), b"tmpfs", flags, opts.encode())
        e = ctypes.get_errno()
    if rc != 0:
        raise OSError(e, f"mount tmpfs on {path}: {os.strerror(e)}")


def mount_tmpfs(path: Path, size: int, inodes: int, uid: int = 0, gid: int = 0) -> None:
    """Mount a fresh tmpfs of `size` bytes and `inodes` files at `path` (raises OSError)."""
    opts = f"size={size},nr_inodes={inodes},mode=0755,uid={uid},gid={gid}"
    _mount(path, _MS_NOSUID | _MS_NODEV, opts)


def unmount(path: Path) -> None:
    """Detach the mount at `path` (lazy: a process still inside cannot block it)."""
    if _c().umount2(os.fsencode(path), _MNT_DETACH) != 0:
        e = ctypes.get_errno()
        if e not in (errno.EINVAL, errno.ENOENT):  # not a mount point / gone
            raise OSError(e, f"umount {path}: {os.strerror(e)}")


def tmpfs_available(probe_dir: Path) -> bool:
    """True when this process may mount tmpfs (root, and not disabled by
    MBB_WORKSPACE_TMPFS=off); probed once, in `probe_dir`."""
    global _tmpfs_ok
    with _lock:
        if _tmpfs_ok is None:
            if (
                os.environ.get("MBB_WORKSPACE_TMPFS", "").lower() in ("off", "0", "no", "false")
                or os.geteuid() != 0
            ):
                _tmpfs_ok = False
            else:
                p = Path(probe_dir) / f".mbb-probe-{os.getpid()}"
                try:
                    p.mkdir(parents=True, exist_ok=True)
                    mount_tmpfs(p, 1 << 20, 16)
                    unmount(p)
                    _tmpfs_ok = True
                except OSError:
                    _tmpfs_ok = False
                finally:
                    with contextlib.suppress(OSError):
                        p.rmdir()
        return _tmpfs_ok


_dev_lock = threading.Lock()
_dev: tuple[int, Path | None] | None = None  # (pid, folder) of this process


def device_nodes() -> Path | None:
    """This process's folder of read-only device nodes (made on first use, removed at exit);
    None where nodes cannot be made (not root, or MBB_WORKSPACE_TMPFS=off)."""
    global _dev
    with _dev_lock:
        if _dev is not None and _dev[0] == os.getpid():  # a forked child makes its own
            return _dev[1]
        folder: Path | None = None
        if tmpfs_available(Path(tempfile.gettempdir())):
            folder = reaper.temp_dir("dev")
            try:
                _mount(folder, _MS_NOSUID | _MS_NOEXEC, "size=16k,nr_inodes=16,mode=0755")
                try:
                    for name, major, minor in DEVICES:
                        os.mknod(folder / name, stat.S_IFCHR | 0o666, os.makedev(major, minor))
                        os.chmod(folder / name, 0o666)  # whatever the umask
                    _mount(folder, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NOEXEC, "")
                except OSError:
                    unmount(folder)
                    raise
                atexit.register(_drop_devices, os.getpid(), folder)
            except OSError:
                with contextlib.suppress(OSError):
                    folder.rmdir()
                folder = None
        _dev = (os.getpid(), folder)
        return folder


def _drop_devices(pid: int, folder: Path) -> None:
    if os.getpid() == pid:
        with contextlib.suppress(OSError):
            unmount(folder)
            folder.rmdir()


def remove_tree(path: Path) -> None:
    """Remove `path` whatever its depth; a tmpfs mounted there is detached first."""
    path = Path(path)
    if not os.path.lexists(path):
        return
    if os.path.ismount(path):
        with contextlib.suppress(OSError):
            unmount(path)
    if path.is_symlink() or not path.is_dir():
        with contextlib.suppress(OSError):
            path.unlink()
        return
    subprocess.run(
        ["rm", "-rf", "--one-file-system", "--", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )


@dataclass(frozen=True, slots=True)
class CopyLimits:
    """What the evaluator accepts in a workspace; past any of them the submission scores 0."""

    max_depth: int = 64  # directory levels below the workspace
    max_entries: int = 4096  # files, directories and links (a workspace holds 4,096 inodes)
    max_bytes: int = 64 << 20  # data bytes (holes of sparse files are free)
    max_file_bytes: int = 1 << 30  # apparent size of one file (holes included)
    max_path: int = 3072  # bytes of one entry's path inside the workspace


class TreeOverLimits(ValueError):
    """The tree exceeds a `CopyLimits` bound (the message names which)."""


@dataclass
class TreeStats:
    entries: int = 0
    bytes: int = 0
    hard_links: int = 0
    skipped: int = 0  # sockets, fifos, devices


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _copy_data(fi: int, fo: int, size: int, budget: int) -> int:
    """Copy the data segments of fi into fo (holes stay holes); returns the bytes copied."""
    copied, pos = 0, 0
    while pos < size:
        try:
            data = os.lseek(fi, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole is left
                break
            raise
        end = os.lseek(fi, data, os.SEEK_HOLE)
        while data < end:
            n = min(1 << 20, end - data)
            chunk = os.pread(fi, n, data)
            if not chunk:
                return copied
            copied += len(chunk)
            if copied > budget:
                raise TreeOverLimits("more data than the evaluation accepts")
            if fo >= 0:
                os.pwrite(fo, chunk, data)
            data += len(chunk)
        pos = end
    return copied


def copy_tree(
    src: Path,
    dst: Path | None,
    limits: CopyLimits = CopyLimits(),
    *,
    skip_top: tuple[str, ...] = (),
    owner: tuple[int, int] | None = None,
) -> TreeStats:
    """Copy the tree at `src` into the existing directory `dst` (or only measure it when `dst`
    is None) within `limits`; raises TreeOverLimits (the copy is then incomplete)."""
    stats = TreeStats()
    root_s = os.open(src, _DIR_FLAGS)
    root_d = os.open(dst, _DIR_FLAGS) if dst is not None else -1
    links: dict[tuple[int, int], str] = {}
    # frames: (source dir fd, destination dir fd, names left, depth, relative path)
    stack: list[tuple[int, int, list[str], int, str]] = [
        (root_s, root_d, sorted(os.listdir(root_s), reverse=True), 0, "")
    ]

    def own(name: str, dfd: int) -> None:
        if owner is not None:
            os.chown(name, *owner, dir_fd=dfd, follow_symlinks=False)

    try:
        while stack:
            sfd, dfd, names, depth, rel = stack[-1]
            if not names:
                stack.pop()
                os.close(sfd)
                if dfd >= 0:
                    os.close(dfd)
                continue
            name = names.pop()
            if depth == 0 and name in skip_top:
                continue
            path = f"{rel}/{name}" if rel else name
            stats.entries += 1
            if stats.entries > limits.max_entries:
                raise TreeOverLimits(f"more than {limits.max_entries} files and directories")
            if len(os.fsencode(path)) > limits.max_path:
                raise TreeOverLimits(f"a path longer than {limits.max_path} bytes")
            try:
                st = os.lstat(name, dir_fd=sfd)
            except FileNotFoundError:
                continue
            mode = st.st_mode
            if stat.S_ISDIR(mode):
                if depth + 1 > limits.max_depth:
                    raise TreeOverLimits(f"directories nested deeper than {limits.max_depth}")
                cs = os.open(name, _DIR_FLAGS, dir_fd=sfd)
                cd = -1
                try:
                    if dfd >= 0:
                        os.mkdir(name, 0o755, dir_fd=dfd)
                        own(name, dfd)
                        cd = os.open(name, _DIR_FLAGS, dir_fd=dfd)
                    kids = sorted(os.listdir(cs), reverse=True)
                except BaseException:
                    os.close(cs)
                    if cd >= 0:
                        os.close(cd)
                    raise
                stack.append((cs, cd, kids, depth + 1, path))
            elif stat.S_ISLNK(mode):
                if dfd >= 0:
                    os.symlink(os.readlink(name, dir_fd=sfd), name, dir_fd=dfd)
                    own(name, dfd)
            elif stat.S_ISREG(mode):
                key = (st.st_dev, st.st_ino)
                if st.st_nlink > 1 and key in links:
                    stats.hard_links += 1
                    if dfd >= 0:
                        os.link(links[key], name, src_dir_fd=root_d, dst_dir_fd=dfd)
                    continue
                if st.st_size > limits.max_file_bytes:
                    raise TreeOverLimits(f"a file larger than {limits.max_file_bytes} bytes")
                if stats.bytes + min(st.st_blocks * 512, st.st_size) > limits.max_bytes:
                    raise TreeOverLimits(f"more than {limits.max_bytes} bytes of data")
                fi = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=sfd)
                fo = -1
                try:
                    if dfd >= 0:
                        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
                        fo = os.open(name, flags, 0o600, dir_fd=dfd)
                    stats.bytes += _copy_data(fi, fo, st.st_size, limits.max_bytes - stats.bytes)
                    if fo >= 0:
                        os.ftruncate(fo, st.st_size)
                        os.fchmod(fo, stat.S_IMODE(mode) & 0o777)  # no setuid/setgid/sticky
                        if owner is not None:
                            os.fchown(fo, *owner)
                finally:
                    os.close(fi)
                    if fo >= 0:
                        os.close(fo)
                if st.st_nlink > 1:
                    links[key] = path
            else:
                stats.skipped += 1
    finally:
        for sfd, dfd, *_ in stack:
            with contextlib.suppress(OSError):
                os.close(sfd)
            if dfd >= 0:
                with contextlib.suppress(OSError):
                    os.close(dfd)
    return stats

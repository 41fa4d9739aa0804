"""Attempted escapes from the sandbox and the window discipline: each must fail AND be recorded."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from mbb.agents.oracle import DEFAULT_ORACLE_DIR
from mbb.resource.sandbox import uid_range
from mbb.tasks.evaluator import evaluate_submission
from mbb.tasks.harness import SolverTools

SECRET = "s3cr3t-of-W2"


@pytest.fixture
def two(env, suite):
    """W1 on `rev` holding a window; W2 on `tac` with a secret in its workspace."""
    env.resource.assign("W1", suite["rev"])
    w2 = env.resource.assign("W2", suite["tac"])
    (w2 / "notes.txt").write_text(SECRET)
    env.grant("W1")
    return env


def run(env, cmd, worker="W1", tool="bash"):
    r = env.resource.run(worker, cmd, tool=tool)
    ev = env.last()
    assert ev["kind"] == "command" and ev["worker"] == worker and ev["command"] == cmd[:2000]
    assert ev["exit_code"] == r.exit_code and ev["killed"] == r.killed
    return r, ev


def blocked(r, ev):
    """Failed and recorded as failed (non-zero exit, killed or refused)."""
    assert not r.ok
    assert ev["exit_code"] != 0 or ev["killed"] or ev["refused"]


def test_read_other_workers_workspace(two):
    other = two.resource.workspace("W2")
    r, ev = run(two, f"cat {other}/notes.txt; ls {other.parent}")
    blocked(r, ev)
    assert SECRET not in r.stdout
    find = "find / -path /usr -prune -o -path /proc -prune -o -name notes.txt -print 2>/dev/null"
    r, ev = run(two, f'found=$({find}); test -n "$found" && cat $found')
    blocked(r, ev)
    assert SECRET not in r.stdout


def test_read_hidden_tests_and_cache(two, suite):
    path = suite["rev"].tests_path
    r, ev = run(two, f"cat {path}")
    blocked(r, ev)
    assert "No such file" in r.stderr and ev["stdout_bytes"] == 0
    r, ev = run(two, f"ls {suite.cache_dir} {Path.home()}")
    blocked(r, ev)


def test_project_sources_and_host_invisible(two):
    here = Path(__file__).resolve()
    r, ev = run(two, f"cat {here} || ls /work /root /home /var")
    blocked(r, ev)
    assert "Attempted escapes" not in r.stdout
    r, ev = run(two, f"test -e /proc/{os.getpid()}")  # host processes are not visible
    blocked(r, ev)


@pytest.mark.parametrize(
    "cmd",
    [
        "cat ./reference",
        "cp ./reference stolen && cat stolen",
        "dd if=./reference of=stolen2",
        "python3 -c \"print(len(open('reference','rb').read()))\"",
        "chmod 644 ./reference && cat ./reference",
        "ln ./reference hard && cat hard",
    ],
)
def test_read_reference_bytes(two, cmd):
    r, ev = run(two, cmd)
    blocked(r, ev)
    assert ev["stdout_bytes"] == 0
    ws = two.resource.workspace("W1")
    for name in ("stolen", "stolen2", "hard"):
        assert not (ws / name).exists() or (ws / name).stat().st_size == 0


def test_reference_is_executable(two):
    r, ev = run(two, "printf 'abc\\n' | ./reference")
    assert r.ok and r.stdout == "cba\n" and ev["exit_code"] == 0


def test_proc_self_exe_of_running_reference(two):
    cmd = (
        "sleep 5 | ./reference & sleep 0.3; pid=$(pgrep -n -f reference || pidof reference); "
        "cat /proc/$pid/exe > stolen; s=$?; "
        "dd if=/proc/$pid/mem of=mem bs=4096 count=1 skip=1 2>/dev/null; kill $pid; exit $s"
    )
    r, ev = run(two, cmd)
    blocked(r, ev)
    ws = two.resource.workspace("W1")
    assert (ws / "stolen").stat().st_size == 0
    assert not (ws / "mem").exists() or (ws / "mem").stat().st_size == 0


@pytest.mark.parametrize("cmd", ["cat /usr/bin/rev", "/usr/bin/rev < /dev/null", "cp /bin/rev x"])
def test_original_on_system_path_hidden(two, suite, cmd):
    r, ev = run(two, cmd)
    blocked(r, ev)
    assert ev["stdout_bytes"] == 0
    assert suite["rev"].original == "/usr/bin/rev"


def test_evaluation_cannot_use_the_original_or_reference(env, suite, tmp_path):
    exe = "> executable; chmod +x executable"
    attempts = {
        "copy_original": "cp /usr/bin/rev executable; chmod +x executable",
        "link_original": "ln -s /usr/bin/rev executable",
        "wrap_original": "printf '#!/bin/sh\\nexec /usr/bin/rev \"$@\"\\n' " + exe,
        "wrap_reference": "printf '#!/bin/sh\\nexec ./reference \"$@\"\\n' " + exe,
        "wrap_abs_reference": "printf '#!/bin/sh\\nexec /workspace/reference \"$@\"\\n' " + exe,
    }
    for name, script in attempts.items():
        d = tmp_path / name
        d.mkdir()
        (d / "compile.sh").write_text(script + "\n")
        n0 = len(env.events("test_result"))
        ev = evaluate_submission(suite["rev"], d, worker="W1", emit=env.log.emit)
        assert ev.result.passed == 0, name
        rows = env.events("test_result")[n0:]
        assert len(rows) == suite["rev"].n_tests and not any(r["passed"] for r in rows)
        assert env.last("command")["tool"] == "compile"


def test_network_dns_blocked(two):
    r, ev = run(
        two,
        "getent hosts localhost || "
        "python3 -c \"import socket; socket.getaddrinfo('example.com', 80)\"",
    )
    blocked(r, ev)


def test_network_loopback_service_outside_unreachable(two):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    got = []

    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                c, _ = srv.accept()
                got.append(c)
            except OSError:
                pass

    th = threading.Thread(target=accept)
    th.start()
    try:
        # sanity: the service is reachable from the host
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
        time.sleep(0.3)
        n_host = len(got)
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"
        r, ev = run(two, f"python3 -c \"{code}\"; bash -c 'echo x > /dev/tcp/127.0.0.1/{port}'")
        blocked(r, ev)
        # no IPv4/IPv6 sockets at all (seccomp: the host-wide TCP socket count)
        assert "Address family not supported" in r.stderr
    finally:
        time.sleep(0.3)
        stop.set()
        th.join()
        srv.close()
    assert len(got) == n_host  # nothing from inside the sandbox arrived


@pytest.mark.parametrize(
    "cmd,host_path",
    [
        ("touch /usr/escape", "/usr/escape"),
        ("echo x > /etc/escape", "/etc/escape"),
        ("mkdir /escape", "/escape"),
        ("touch ../escape", None),
    ],
)
def test_write_outside_workspace(two, cmd, host_path):
    r, ev = run(two, cmd)
    blocked(r, ev)
    if host_path:
        assert not Path(host_path).exists()
    assert not (two.resource.workspace("W1").parent / "escape").exists()


def test_private_tmp(two):
    marker = f"/tmp/mbb-private-{os.getpid()}"
    r, ev = run(two, f"echo hi > {marker} && cat {marker}")
    assert r.ok and ev["exit_code"] == 0
    assert not Path(marker).exists()  # the sandbox's /tmp is its own


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
    """Wait (up to 20 s, polling) until no sandboxed process is left: reaping a killed pid
    namespace is asynchronous, more so on a loaded machine; the check is that none survive."""
    for _ in range(200):
        if not _sandbox_procs():
            return True
        time.sleep(0.1)
    return False


def test_fork_bomb(two):
    r, ev = run(two, "python3 -c 'import os\nwhile True: os.fork()'")
    blocked(r, ev)
    assert "Resource temporarily unavailable" in r.stderr or ev["killed"]
    assert _no_sandbox_procs_left()


def test_memory_hog(two):
    r, ev = run(two, "python3 -c 'x = bytearray(4 << 30); print(len(x))'")
    blocked(r, ev)
    assert "MemoryError" in r.stderr


def test_disk_filler(two):
    r, ev = run(two, "head -c 200000000 /dev/zero > big")
    blocked(r, ev)
    big = two.resource.workspace("W1") / "big"
    assert big.stat().st_size <= two.resource.limits.file_bytes
    r, ev = run(two, "head -c 200000000 /dev/zero > /tmp/big")
    blocked(r, ev)


def test_output_flood(two):
    r, ev = run(two, "yes flood")
    assert ev["truncated"] is True and r.truncated
    assert ev["stdout_bytes"] > two.resource.limits.output_bytes
    assert len(r.stdout) <= two.resource.limits.output_bytes
    assert not ev["killed"]  # the pipe is closed: the flood dies of SIGPIPE, not the wall cap
    blocked(r, ev)


def test_sigterm_ignorer_killed_at_window_end(measured_env, suite):
    env = measured_env
    env.resource.assign("W1", suite["rev"])
    env.grant("W1", 1.5)
    r, ev = run(env, "trap '' TERM INT; sleep 60 & trap '' TERM; while :; do sleep 1; done")
    assert r.killed and ev["killed"] is True and ev["exit_code"] is None
    assert ev["reason"] == "window_end"
    assert ev["runtime"] == pytest.approx(1.5)  # charged up to the window's end, not beyond
    assert _no_sandbox_procs_left()
    r, ev = run(env, "true")  # the window is over
    assert r.refused and ev["refused"] and ev["reason"] == "window_over"


def test_commands_outside_window_refused(env, suite):
    env.resource.assign("W1", suite["rev"])
    env.resource.assign("W2", suite["tac"])
    r, ev = run(env, "true", worker="W1")
    assert r.refused and ev["refused"] and ev["exit_code"] is None
    env.grant("W1", 100)
    r, ev = run(env, "touch x", worker="W2")  # W1 holds it
    assert r.refused and ev["refused"] and "not_holder" in ev["reason"]
    assert not (env.resource.workspace("W2") / "x").exists()
    tools = SolverTools("W2", env.resource)
    res = tools.write("y.txt", "nope")
    assert res.refused and "refused" in (res.error or "")
    assert env.last()["refused"] and env.last()["tool"] == "write"
    env.resource.close_window("W1")
    r, ev = run(env, "true", worker="W1")
    assert r.refused and ev["refused"]


def test_symlink_to_hidden_path(two, suite):
    tests_json = suite["rev"].tests_path
    other = two.resource.workspace("W2") / "notes.txt"
    r, ev = run(two, f"ln -s {tests_json} leak1 && ln -s {other} leak2 && cat leak1 leak2")
    blocked(r, ev)
    assert SECRET not in r.stdout and ev["stdout_bytes"] == 0
    tools = SolverTools("W1", two.resource)
    res = tools.read("leak1")
    assert not res.ok and two.last()["tool"] == "read" and two.last()["exit_code"] != 0


def test_symlinks_not_followed_by_evaluation(env, suite, tmp_path):
    d = tmp_path / "sub"
    d.mkdir()
    (d / "compile.sh").write_text("cp leak executable\n")
    os.symlink(suite["rev"].tests_path, d / "leak")  # a host-side link into the hidden tests
    ev = evaluate_submission(suite["rev"], d, worker="W1", emit=env.log.emit)
    assert ev.result.passed == 0
    assert env.last("command")["exit_code"] != 0  # cp could not follow it inside the sandbox


def test_compile_sh_that_downloads(env, suite, tmp_path):
    d = tmp_path / "dl"
    d.mkdir()
    (d / "compile.sh").write_text(
        'set -e\npython3 -c "import urllib.request; '
        "open('executable','wb').write(urllib.request.urlopen('http://deb.debian.org/').read())\"\n"
        "chmod +x executable\n"
    )
    ev = evaluate_submission(suite["rev"], d, worker="W1", emit=env.log.emit)
    assert ev.result.passed == 0 and not ev.compiled
    c = env.last("command")
    assert c["tool"] == "compile" and c["exit_code"] != 0
    assert len(env.events("test_result")) == suite["rev"].n_tests


def test_executable_changed_between_tests_is_refused(env, suite, tmp_path):
    oracle = DEFAULT_ORACLE_DIR / "rev" / "main.py"
    d = tmp_path / "tamper"
    d.mkdir()
    (d / "main.py").write_text(
        oracle.read_text() + "\nimport os\nopen('/workspace/executable', 'a').write('\\n#x\\n')\n"
    )
    (d / "compile.sh").write_text("cp main.py executable && chmod +x executable\n")
    ev = evaluate_submission(suite["rev"], d, worker="W1", emit=env.log.emit, parallel=1)
    assert ev.tampered and ev.result.passed == 0 and ev.result.score == 0.0
    rows = env.events("test_result")
    assert any("executable changed" in (r["reason"] or "") for r in rows)
    assert not any(r["passed"] for r in rows)


def test_missing_results_count_as_failures(env, suite, tmp_path):
    d = tmp_path / "slow"
    d.mkdir()
    (d / "compile.sh").write_text(
        "printf '#!/bin/sh\\nexit 3\\n' > executable; chmod +x executable\n"
    )
    ev = evaluate_submission(suite["rev"], d)
    assert ev.result.total == suite["rev"].n_tests and ev.result.passed == 0
    assert all(not r["passed"] for r in ev.rows)


def test_same_program_under_another_name_hidden(env, suite):
    """base64's twin `basenc --base64` is the same code: hidden from the base64 worker."""
    env.resource.assign("W1", suite["base64"])
    env.grant("W1")
    assert "/usr/bin/basenc" in suite["base64"].also_hidden
    r, ev = run(env, "printf hi | basenc --base64")
    blocked(r, ev)
    r, ev = run(env, "printf hi | ./reference")
    assert r.ok and r.stdout == "aGk=\n"


DUMP_C = r"""
#include <stdio.h>
#include <string.h>
__attribute__((constructor)) static void dump(void) {
  FILE *m = fopen("/proc/self/maps", "r"); char l[512];
  FILE *o = fopen("/workspace/dump.bin", "w");
  while (m && o && fgets(l, sizeof l, m)) {
    unsigned long a, b; char p[5];
    if (sscanf(l, "%lx-%lx %4s", &a, &b, p) == 3 && p[0] == 'r' && strstr(l, "reference"))
      fwrite((void *)a, 1, b - a, o);
  }
  if (o) fclose(o);
}
"""
LD_PRELOAD_ATTACK = (
    f"cat > d.c <<'X'\n{DUMP_C}\nX\n"
    "gcc -shared -fPIC -o d.so d.c && printf 'abc\\n' | LD_PRELOAD=./d.so ./reference; "
    "test -s dump.bin"
)
needs_gcc = pytest.mark.skipif(not Path("/usr/bin/gcc").exists(), reason="gcc not installed")


@needs_gcc
def test_known_gap_ld_preload_dumps_an_exec_only_reference(two, suite):
    """Documents why broker mode exists: a 0111 copy is still mapped into a process the worker
    controls, so a preloaded library can copy it out of memory."""
    r, ev = run(two, LD_PRELOAD_ATTACK)
    dump = (two.resource.workspace("W1") / "dump.bin").read_bytes()
    assert r.ok and ev["exit_code"] == 0
    assert suite["rev"].reference.read_bytes()[:4096] in dump  # the ELF header page leaks


@pytest.fixture
def broker(tmp_path, suite):
    from conftest import Env

    e = Env(tmp_path / "b")
    e.resource = type(e.resource)(tmp_path / "b" / "res", emit=e.log.emit, reference_mode="broker")
    e.resource.assign("W1", suite["rev"])
    e.grant("W1")
    yield e
    e.resource.close()
    e.log.close()


def test_broker_reference_behaves_like_the_program(broker):
    r, ev = run(broker, "printf 'abc\\nxy\\n' | ./reference")
    assert r.ok and r.stdout == "cba\nyx\n"
    r, ev = run(broker, "echo hi > f; ./reference f missing")
    assert ev["exit_code"] == 1 and r.stdout == "ih\n" and "missing" in r.stderr
    r, ev = run(broker, "./reference --help")
    assert r.ok and "Usage" in r.stdout


@needs_gcc
def test_broker_blocks_ld_preload_dump(broker, suite):
    r, ev = run(broker, LD_PRELOAD_ATTACK)
    blocked(r, ev)  # nothing of the reference is mapped in the worker's processes
    dump = broker.resource.workspace("W1") / "dump.bin"
    ref = suite["rev"].reference.read_bytes()
    assert not dump.exists() or ref[:4096] not in dump.read_bytes()


def test_broker_reference_bytes_unreachable(broker, suite):
    ref = suite["rev"].reference.read_bytes()
    r, ev = run(broker, "cat ./reference; cat /usr/bin/rev; ls /opt /run")
    blocked(r, ev)
    assert ref[:64] not in r.stdout.encode("utf-8", "surrogateescape")
    assert "ELF" not in r.stdout


def test_broker_oracle_end_to_end(broker, suite):
    import asyncio

    from mbb.agents.oracle import make_oracle_solver
    from mbb.core.agent_api import TaskAssignment

    broker.resource.close_window("W1")
    solver = make_oracle_solver(
        "W1",
        suite=suite,
        resource=broker.resource,
        emit=broker.log.emit,
        time_model="virtual",
        rng=None,
    )

    async def go():
        await solver.start_subrun(TaskAssignment("tac", 0.0, 0), None)
        await solver.run_window(broker.grant("W1", 300))
        return await solver.evaluate()

    assert asyncio.run(go()).score == 1.0
    assert "a" in solver.observed["0"]  # the sample ran through the broker

"""Issue 17, item 3: the evaluator's copy (sparse files, hard links, deep and huge trees, the
score-0 rule), a fresh workspace per hidden test, an evaluation that looks like a window, and
evaluation time capped."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mbb.agents.oracle import DEFAULT_ORACLE_DIR
from mbb.resource import fs
from mbb.resource.fs import CopyLimits, TreeOverLimits, copy_tree
from mbb.resource.sandbox import uid_range
from mbb.tasks import evaluator
from mbb.tasks.evaluator import evaluate_submission

ORACLE = DEFAULT_ORACLE_DIR / "rev" / "main.py"


def _ws(tmp_path: Path, name: str, compile_sh: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "compile.sh").write_text(compile_sh)
    return d


def _compile_exit(env) -> int | None:
    c = env.last("command")
    assert c["tool"] == "compile"
    return c["exit_code"]


def _deep(root: Path, depth: int) -> None:
    """A `depth`-deep chain of directories (built fd by fd: its path exceeds PATH_MAX)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.close(fd)


# --- the copy ---------------------------------------------------------------------------------
def test_sparse_file_stays_sparse(env, suite, tmp_path):
    d = _ws(
        tmp_path,
        "sparse",
        'test "$(stat -c %b big)" -lt 4096 && test "$(stat -c %s big)" = 536870912 && '
        "cmp -n 1048576 big /dev/zero >/dev/null; head -c 5 big.tail > /dev/null; "
        "printf '#!/bin/sh\\nexit 0\\n' > executable && chmod +x executable && "
        'test "$(stat -c %b big)" -lt 4096\n',
    )
    with open(d / "big", "wb") as f:
        f.truncate(512 << 20)
        f.seek(300 << 20)
        f.write(b"data")
    ev = evaluate_submission(suite["rev"], d, worker="W1", emit=env.log.emit)
    assert _compile_exit(env) == 0, ev.notes
    assert ev.compiled


def test_hard_links_stay_linked(env, suite, tmp_path):
    d = _ws(
        tmp_path,
        "links",
        'test "$(stat -c %h one)" = 81 && test "$(du -sk . | cut -f1)" -lt 4096 && '
        "printf '#!/bin/sh\\nexit 0\\n' > executable && chmod +x executable\n",
    )
    (d / "one").write_bytes(os.urandom(1 << 20))
    (d / "sub").mkdir()
    for i in range(80):
        os.link(d / "one", d / ("sub" if i % 2 else ".") / f"l{i}")
    ev = evaluate_submission(suite["rev"], d, worker="W1", emit=env.log.emit)
    assert _compile_exit(env) == 0, ev.notes


def test_1200_deep_directory_scores_zero_without_recursion_error(env, suite, tmp_path):
    d = _ws(tmp_path, "deep", "cp main.py executable && chmod +x executable\n")
    (d / "main.py").write_text(ORACLE.read_text())
    _deep(d, 1200)
    t0 = time.monotonic()
    try:
        ev = evaluate_submission(suite["rev"], d, worker="W1", emit=env.log.emit)
    finally:
        fs.remove_tree(d)  # pytest's own clean-up of tmp_path would recurse
    assert ev.result.score == 0.0 and time.monotonic() - t0 < 10
    assert all("workspace over limits" in r["reason"] for r in ev.rows)
    assert "nested deeper" in ev.notes[-1]
    assert len(env.events("test_result")) == suite["rev"].n_tests


def test_1200_deep_directory_made_in_a_window_then_next_subrun(env, suite):
    """Made inside the sandbox: evaluation scores 0, and the next subrun's set-up works."""
    env.resource.assign("W1", suite["rev"])
    env.grant("W1")
    r = env.resource.run(
        "W1", 'python3 -c \'import os\nfor _ in range(1200): os.mkdir("d"); os.chdir("d")\''
    )
    assert r.ok, r.stderr
    ev = evaluate_submission(suite["rev"], env.resource.workspace("W1"))
    assert ev.result.score == 0.0 and "nested deeper" in ev.notes[-1]
    env.resource.close_window("W1")
    ws = env.resource.assign("W1", suite["tac"])  # no RecursionError
    assert sorted(p.name for p in ws.iterdir()) == ["docs.txt", "reference"]


def test_deep_plain_tree_removed(tmp_path):
    d = tmp_path / "plain"
    d.mkdir()
    _deep(d, 1500)
    fs.remove_tree(d)
    assert not d.exists()


def test_compile_that_builds_a_deep_tree_scores_zero(env, suite, tmp_path):
    d = _ws(
        tmp_path,
        "deepc",
        "cp main.py executable && chmod +x executable && "
        "for i in $(seq 1 100); do mkdir d && cd d; done\n",
    )
    (d / "main.py").write_text(ORACLE.read_text())
    ev = evaluate_submission(suite["rev"], d, worker="W1", emit=env.log.emit)
    assert ev.result.score == 0.0 and "after compiling" in ev.notes[-1]


def _sparse(p: Path, size: int) -> None:
    with open(p, "wb") as f:
        f.truncate(size)


def _two_levels(d: Path, a: str, b: str) -> None:
    (d / a).mkdir()
    (d / a / b).touch()


@pytest.mark.parametrize(
    "limit,make",
    [
        ("max_entries", lambda d: [(d / f"f{i}").touch() for i in range(300)]),
        ("max_bytes", lambda d: (d / "big").write_bytes(os.urandom(3 << 20))),
        (
            "max_file_bytes",
            lambda d: os.truncate(d / "s", 5 << 20) if (d / "s").touch() is None else 0,
        ),
        (
            "max_path",
            lambda d: (d / ("n" * 250)).mkdir() or (d / ("n" * 250) / ("m" * 250)).touch(),
        ),
    ],
)
def test_each_limit_scores_zero(env, suite, tmp_path, limit, make):
    d = _ws(tmp_path, limit, "cp main.py executable && chmod +x executable\n")
    (d / "main.py").write_text(ORACLE.read_text())
    make(d)
    small = CopyLimits(max_entries=200, max_bytes=2 << 20, max_file_bytes=4 << 20, max_path=400)
    ev = evaluate_submission(suite["rev"], d, copy_limits=small)
    assert ev.result.score == 0.0 and "over the evaluation limits" in ev.notes[-1]
    ok = evaluate_submission(suite["rev"], d)  # the same workspace within the default limits
    assert ok.result.score == 1.0, ok.notes


def test_copy_refuses_to_follow_links_and_skips_special_files(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    os.symlink("/etc", src / "etc")
    os.symlink("/etc/passwd", src / "pw")
    os.mkfifo(src / "fifo")
    (src / "a").write_text("a")
    st = copy_tree(src, dst)
    assert os.readlink(dst / "etc") == "/etc" and (dst / "etc").is_symlink()
    assert not (dst / "fifo").exists() and st.skipped == 1
    assert (dst / "a").read_text() == "a"
    with pytest.raises(TreeOverLimits):
        copy_tree(src, None, CopyLimits(max_entries=2))


def test_setuid_bits_dropped_in_the_copy(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "x").write_text("x")
    os.chmod(src / "x", 0o6755)
    copy_tree(src, dst)
    assert (dst / "x").stat().st_mode & 0o7777 == 0o755


def test_fifo_in_the_workspace_does_not_hang_the_evaluation(env, suite, tmp_path):
    d = _ws(tmp_path, "fifo", "cp main.py executable && chmod +x executable\n")
    (d / "main.py").write_text(ORACLE.read_text())
    os.mkfifo(d / "pipe")
    t0 = time.monotonic()
    ev = evaluate_submission(suite["rev"], d)
    assert ev.result.score == 1.0 and time.monotonic() - t0 < 30


# --- fresh per test, and like a window ----------------------------------------------------------
def test_a_fresh_workspace_per_hidden_test(env, suite, tmp_path):
    """Each test leaves a mark in the workspace and in /tmp; the next one must see none."""
    d = _ws(tmp_path, "fresh", "cp run.sh executable && chmod +x executable\n")
    (d / "run.sh").write_text(
        "#!/bin/sh\nn=$(ls /workspace/mark.* /tmp/mark.* 2>/dev/null | wc -l)\n"
        "touch /workspace/mark.$$ /tmp/mark.$$\nexit $n\n"
    )
    ev = evaluate_submission(suite["rev"], d, parallel=1)
    assert [r["exit_code"] for r in ev.rows] == [0] * suite["rev"].n_tests
    assert not ev.tampered


FINGERPRINT = (
    "{ env | grep -v -E '^(_|SHLVL|OLDPWD)=' | sort; id; hostname; pwd; ulimit -a; "
    "stat -f -c '%T %b %c' /workspace; stat -c '%a %U %s' /workspace/reference; "
    "grep ' /workspace ' /proc/self/mountinfo | cut -d' ' -f4-; "
    "grep -E '^(Seccomp|NoNewPrivs|CapEff|CapBnd)' /proc/self/status; cat /proc/self/cgroup; "
    "} | sha256sum | cut -c1-16"
)


@pytest.mark.parametrize("mode", ["exec_only", "broker"])
def test_an_executable_cannot_tell_it_is_evaluated(env, suite, tmp_path, mode):
    """Paths, environment, uid, limits, file system of /workspace, ./reference and filters
    are the same in a window and in the evaluation's test runs."""
    from mbb.resource.resource import ExecutionResource

    env.resource = ExecutionResource(tmp_path / "r", emit=env.log.emit, reference_mode=mode)
    env.resource.assign("W1", suite["rev"])
    env.grant("W1")
    r = env.resource.run("W1", FINGERPRINT)
    window = r.stdout.strip()
    assert r.ok and len(window) == 16
    d = env.resource.workspace("W1")  # evaluated as the harness does: the window's workspace
    (d / "compile.sh").write_text("cp probe.sh executable && chmod +x executable\n")
    (d / "probe.sh").write_text(
        f'#!/bin/bash\nfp=$({FINGERPRINT})\n[ "$fp" = {window} ] || exit 7\n'
    )
    ev = evaluate_submission(suite["rev"], d, parallel=1, reference_mode=mode)
    assert {r["exit_code"] for r in ev.rows} == {0}, ev.rows[0]
    env.resource.close()


def test_no_host_path_visible_in_evaluation(env, suite, tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    leaks = [str(scratch), str(tmp_path), str(suite.cache_dir), f"{Path.home()}/"]
    greps = " || ".join(
        f"cat /proc/self/mountinfo /proc/1/cmdline /proc/self/environ | grep -q -F '{p}'"
        for p in leaks
    )
    d = _ws(tmp_path, "paths", "cp probe.sh executable && chmod +x executable\n")
    (d / "probe.sh").write_text(f"#!/bin/bash\nif {greps}; then exit 9; fi\nexit 0\n")
    ev = evaluate_submission(suite["rev"], d, parallel=1, scratch_root=scratch)
    assert {r["exit_code"] for r in ev.rows} == {0}


# --- time ---------------------------------------------------------------------------------------
def test_tests_share_a_wall_budget(suite, tmp_path):
    d = _ws(tmp_path, "slow", "printf '#!/bin/sh\\nsleep 9\\n' > executable; chmod +x executable\n")
    t0 = time.monotonic()
    ev = evaluate_submission(suite["rev"], d, tests_budget_s=2.0)
    wall = time.monotonic() - t0
    assert wall < 10, wall
    reasons = [r["reason"] for r in ev.rows]
    assert "evaluation time budget exhausted" in reasons and ev.result.score == 0.0


def test_compile_is_capped(env, suite, tmp_path, monkeypatch):
    monkeypatch.setattr(evaluator, "COMPILE_TIMEOUT_S", 1.0)
    d = _ws(tmp_path, "slowc", "sleep 30 & sleep 30\n")
    t0 = time.monotonic()
    ev = evaluate_submission(suite["rev"], d, worker="W1", emit=env.log.emit)
    assert time.monotonic() - t0 < 10 and ev.result.score == 0.0
    c = env.last("command")
    assert c["killed"] and c["runtime"] == 0.0 and c["reason"] == "evaluation"
    assert _no_sandbox_procs_left()


def test_defaults_cap_an_evaluation(suite):
    n = suite["rev"].n_tests
    assert evaluator.COMPILE_TIMEOUT_S + evaluator.TESTS_BUDGET_S <= 120
    assert evaluator.TEST_TIMEOUT_S * n >= evaluator.TESTS_BUDGET_S  # the budget binds


def test_evaluation_memory_is_a_total(suite, tmp_path):
    from mbb.resource import cgroups
    from mbb.resource.sandbox import SandboxLimits

    if not cgroups.available():
        pytest.skip("no cgroup delegation here")
    hog = "python3 -c 'import time; x = b\"\\x01\" * (150 << 20); time.sleep(1.5)'"
    d = _ws(
        tmp_path,
        "mem",
        f"for i in 1 2 3 4; do {hog} & done; ok=0; for j in 1 2 3 4; do wait -n && ok=$((ok+1)); "
        "done; test $ok -ge 2 && cp main.py executable && chmod +x executable\n",
    )
    (d / "main.py").write_text(ORACLE.read_text())
    ev = evaluate_submission(suite["rev"], d, limits=SandboxLimits(total_memory_bytes=256 << 20))
    assert not ev.compiled and ev.result.score == 0.0


def _no_sandbox_procs_left() -> bool:
    for _ in range(100):
        procs = []
        for p in Path("/proc").iterdir():
            if p.name.isdigit():
                try:
                    if p.stat().st_uid in uid_range():
                        procs.append(p)
                except OSError:
                    pass
        if not procs:
            return True
        time.sleep(0.1)
    return False


def test_chown_tree_handles_deep_trees(tmp_path):
    from mbb.resource.sandbox import chown_tree, default_uid

    if os.geteuid() != 0:
        pytest.skip("root only")
    d = tmp_path / "own"
    d.mkdir()
    (d / "reference").touch()
    os.symlink("/etc/passwd", d / "link")
    _deep(d, 1200)
    try:
        uid = default_uid()
        chown_tree(d, uid)
        assert d.stat().st_uid == uid and (d / "d").stat().st_gid == uid
        assert (d / "reference").stat().st_uid == 0
        assert Path("/etc/passwd").stat().st_uid == 0  # the link was not followed
    finally:
        fs.remove_tree(d)

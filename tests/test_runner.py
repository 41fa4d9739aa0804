"""The batch runner: the same tables with one process or two, one pool reused across batches,
progress per chunk, and no worker process left behind."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from mbb.batch import runner
from mbb.batch.runner import run_many


def _session_members(sid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # after the command: state, ppid, pgrp, session
            members.append(int(stat.parent.name))
    return members


def test_two_processes_give_the_same_tables_and_reuse_one_pool(base, tmp_path):
    one = run_many(base, runs=12, processes=1, out_dir=tmp_path / "one")
    seen: list[int] = []
    two = run_many(base, runs=12, processes=2, out_dir=tmp_path / "two", progress=seen.append)
    assert one.run_ids == two.run_ids and not two.failed
    assert sum(seen) == 12 and max(seen) <= runner.MAX_CHUNK and len(seen) >= 2
    for name, df in one.tables.items():
        assert df.equals(two.tables[name]), name
    pool = runner._pool
    assert pool is not None
    run_many(base, runs=4, processes=2, write=False)
    assert runner._pool is pool  # started once, reused
    pids = [p.pid for p in pool._processes.values()]
    runner.shutdown_pool(kill=True)
    assert runner._pool is None
    # by the kernel's word: Process.is_alive() says True for a child another thread reaped
    deadline = time.monotonic() + 10
    while [p for p in pids if _running(p)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in pids if _running(p)] == []


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_no_worker_process_outlives_the_command(tmp_path):
    cmd = [sys.executable, "-m", "mbb", "run", "base", "--runs", "30", "--processes", "2"]
    proc = subprocess.Popen(
        [*cmd, "--quiet", "--out", str(tmp_path / "out")],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    # multiprocessing's resource tracker exits when it sees the command's end: give it a moment
    deadline = time.monotonic() + 10
    while _session_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _session_members(proc.pid) == []


def test_run_many_takes_its_folder_as_a_string(base, tmp_path, monkeypatch):
    """A folder given as a str (as most users type it) used to fail deep inside with
    "unsupported operand type(s) for /: 'str' and 'str'"; `~` is expanded as everywhere."""
    monkeypatch.setenv("HOME", str(tmp_path))
    res = run_many(base, runs=1, out_dir="~/out", processes=1)
    assert res.out_dir == tmp_path / "out" and (tmp_path / "out" / res.run_ids[0]).is_dir()


def test_a_linked_run_folder_is_no_finished_run_and_gets_no_meta_json(base, tmp_path):
    """A study's resume counted a run folder linked to a finished run elsewhere as done and
    wrote its missing meta.json there (a red team's find)."""
    import shutil

    res = run_many(base, runs=1, out_dir=tmp_path / "a", processes=1)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(tmp_path / "a" / res.run_ids[0], elsewhere)
    (elsewhere / "meta.json").unlink()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / res.run_ids[0]).symlink_to(elsewhere)
    assert runner.finished_log(tmp_path / "b" / res.run_ids[0]) is None
    assert not (elsewhere / "meta.json").exists()


def test_a_notebook_is_never_written_through_a_link(tmp_path):
    """A study's resume ran its notebooks into a planted link (a red team's find)."""
    from mbb.batch.notebooks import execute_notebook

    victim = tmp_path / "victim.ipynb"
    victim.write_text("mine")
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "token_audit.ipynb").symlink_to(victim)
    with pytest.raises(ValueError, match="a symbolic link; mbb never writes a notebook"):
        execute_notebook("token_audit", tmp_path / "nb", {})
    assert victim.read_text() == "mine"


def test_a_script_that_calls_run_many_unguarded_is_told_how_to_mend_it(tmp_path):
    """Worker processes are spawned, so each runs a script's top level again while it starts.
    A script calling run_many there without `if __name__ == "__main__":` used to end in
    BrokenProcessPool after each worker failed to claim the folder its parent held
    ("another mbb process is writing into this folder"), which pointed nowhere near the cause.
    Now the worker says what to do, and the batch ends in BatchWorkerDied."""
    script = tmp_path / "batch.py"
    script.write_text(
        "from mbb.batch.build import load_params\n"
        "from mbb.batch.runner import run_many\n"
        "run_many(load_params('base', {'subruns': 1}), runs=4, processes=2,"
        f" out_dir={str(tmp_path / 'out')!r})\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert proc.returncode != 0
    assert 'must put its calls under `if __name__ == "__main__":`' in proc.stderr
    assert "BatchWorkerDied: a worker process of the batch of 'base' died" in proc.stderr
    assert "another mbb process" not in proc.stderr


def test_after_ctrl_c_the_bar_shows_the_count_the_message_gives(base, tmp_path, monkeypatch):
    """Ctrl-C mid-batch: the progress bar ends at the number of runs the message reports (the
    runs whose logs finished), never below it."""
    from mbb.batch.runner import BatchInterrupted

    real = runner._run_chunk
    chunks = []

    def stop_after_two(*args, **kwargs):
        if len(chunks) == 2:
            raise KeyboardInterrupt
        chunks.append(args[1])
        return real(*args, **kwargs)

    finished: list[int] = []
    real_finish = runner._Progress.finish

    def finish(self, done):
        real_finish(self, done)
        finished.append(self.bar.n)

    monkeypatch.setattr(runner, "_run_chunk", stop_after_two)
    monkeypatch.setattr(runner._Progress, "finish", finish)
    with pytest.raises(BatchInterrupted) as exc:
        run_many(base, runs=20, out_dir=tmp_path / "o", processes=1, progress=True)
    assert exc.value.done == sum(len(c) for c in chunks) == 10
    assert finished == [exc.value.done]

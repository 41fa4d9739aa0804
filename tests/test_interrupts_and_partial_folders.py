"""Issue 26, item 7: Ctrl-C at any moment is one line (no worker traceback, including while the
workers start), whatever SIGINT disposition the command inherited; `mbb tables` never
tabulates a fraction of a folder being written without saying so.

The moment is not left to timing: the Ctrl-C is sent as soon as the first worker process
exists (it is then importing, before its initializer), and again at chosen moments after."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mbb.batch.build import load_params
from mbb.batch.outdir import claim
from mbb.cli import main
from mbb.core.paths import PROJECT_ROOT

BASE = PROJECT_ROOT / "params" / "base.yaml"
RUNS = 160  # >= PARALLEL_FROM: two worker processes


def _cmd(out: Path) -> list[str]:
    return [sys.executable, "-m", "mbb", "run", str(BASE), "--runs", str(RUNS), "--out", str(out)]


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _start(out: Path, *, ignore_sigint: bool = False) -> subprocess.Popen[str]:
    def prepare() -> None:
        if ignore_sigint:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    return subprocess.Popen(
        [*_cmd(out), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the "terminal" we press Ctrl-C in
        preexec_fn=prepare,
    )


def _when_workers_start(proc: subprocess.Popen[str]) -> None:
    """Return as soon as the command has started a worker process (it is importing now)."""
    deadline = time.monotonic() + 120
    while not _children(proc.pid):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.002)


def _ctrl_c(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal does: the whole process group


@pytest.mark.parametrize("after_s", [0.0, 0.15, 0.4])
def test_ctrl_c_while_the_workers_start_is_one_line(tmp_path, after_s) -> None:
    proc = _start(tmp_path / "o")
    _when_workers_start(proc)
    time.sleep(after_s)
    _ctrl_c(proc)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "BrokenProcessPool" not in err, err
    assert len(err.splitlines()) == 1 and err.startswith("interrupted"), err


def test_ctrl_c_while_the_command_itself_starts_is_one_line(tmp_path) -> None:
    """Before any worker: the command's own imports are light (each command imports its
    library inside its function, within the handler), so a Ctrl-C there is one line too."""
    proc = _start(tmp_path / "o")
    time.sleep(0.25)  # the interpreter is up; mbb's imports and the params are being read
    _ctrl_c(proc)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode in (130, -signal.SIGINT), err
    if proc.returncode == 130:  # else: the interpreter had not started mbb's code yet
        assert "Traceback" not in err and len(err.splitlines()) == 1, err


def test_a_batch_started_with_sigint_ignored_ignores_it(tmp_path) -> None:
    """`nohup`, a background job of a script: Ctrl-C is ignored by the command and so by its
    workers (polars catches SIGINT natively, so a worker would otherwise inherit the default
    action through exec, die while importing and break the pool)."""
    out = tmp_path / "o"
    proc = _start(out, ignore_sigint=True)
    _when_workers_start(proc)
    for _ in range(3):
        _ctrl_c(proc)
        time.sleep(0.3)
    stdout, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "BrokenProcessPool" not in err
    assert f"{RUNS} run(s) of 'base'" in stdout


# --- mbb tables on a folder being written ---------------------------------------------------
@pytest.fixture
def written(tmp_path: Path) -> tuple[object, Path]:
    cond = load_params(BASE, {"subruns": 1})
    out = tmp_path / "o"
    assert (
        main(["run", str(BASE), "--runs", "3", "--out", str(out), "--quiet", "--set", "subruns=1"])
        == 0
    )
    return cond, out


def test_tables_refuse_a_folder_whose_writer_holds_the_lock(written, capsys) -> None:
    cond, out = written
    capsys.readouterr()
    with claim(out, cond):  # another writer, as `mbb run` holds it
        assert main(["tables", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is writing into this folder" in err
        assert "--partial" in err
        assert main(["tables", str(out), "--partial"]) == 0
        assert "warning:" in capsys.readouterr().err
    assert main(["tables", str(out)]) == 0  # the writer is gone


def test_tables_refuse_runs_that_have_not_ended(written, capsys) -> None:
    _, out = written
    log = out / "base-seed0001" / "events.jsonl"
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[: len(lines) // 2]) + "\n")  # killed half-way (or running)
    capsys.readouterr()
    before = {p: p.stat().st_mtime_ns for p in (out / "tables").iterdir()}
    assert main(["tables", str(out)]) == 2
    err = capsys.readouterr().err
    assert "1 of 3 run(s) have not ended (base-seed0001)" in err and err.count("\n") == 1
    assert {p: p.stat().st_mtime_ns for p in (out / "tables").iterdir()} == before
    assert main(["tables", str(out), "--partial"]) == 0
    assert "tabulated as they are" in capsys.readouterr().err

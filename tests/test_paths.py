"""One path rule (mbb.core.paths): relative paths are relative to the current directory for every
command and notebook parameter; bare names are mbb's own conditions and notebooks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mbb.batch.build import load_params
from mbb.core.paths import NOTEBOOKS_DIR, PARAMS_DIR, notebook_file, params_file, user_path
from mbb.params import ParamsError


def test_user_paths_are_relative_to_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert user_path("out/x") == tmp_path / "out" / "x"
    assert user_path("/abs/y") == user_path("/abs/y").absolute()
    assert params_file("mine.yaml") == tmp_path / "mine.yaml"
    assert params_file("sub/base") == tmp_path / "sub" / "base"  # a folder: a path, not a name
    assert notebook_file("nb.ipynb") == tmp_path / "nb.ipynb"


def test_bare_names_are_mbbs_own_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base").write_text("name: not_this_one\n")  # never looked up for a bare name
    assert params_file("base") == PARAMS_DIR / "base.yaml"
    assert notebook_file("run_condition") == NOTEBOOKS_DIR / "run_condition.ipynb"
    assert load_params("base").name == "base"
    with pytest.raises(
        FileNotFoundError, match=r"no condition named 'bse' in mbb's params/ \(known: "
    ):
        params_file("bse")
    with pytest.raises(ParamsError, match=r"named 'bse'.*a file of your own is a path"):
        load_params("bse")


def test_a_users_params_file_extends_a_condition_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text("extends: memory_off\nname: mine\n")
    cond = load_params("mine.yaml")
    assert cond.name == "mine" and cond.memory.enabled is False
    (tmp_path / "bad.yaml").write_text("extends: nope\nname: bad\n")
    with pytest.raises(ParamsError, match=r"bad\.yaml: extends: no condition named 'nope'"):
        load_params("bad.yaml")


def mbb(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mbb", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_run_writes_where_the_user_stands(tmp_path):
    (tmp_path / "mine.yaml").write_text("extends: base\nname: mine\nsubruns: 1\n")
    r = mbb("run", "mine.yaml", "--out", "here", "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "here" / "tables" / "rounds.parquet").is_file()
    assert list((tmp_path / "here").glob("mine-seed*/events.jsonl"))


@pytest.mark.notebook
def test_sweep_and_notebook_resolve_against_the_current_directory(root, tmp_path):
    """From a folder outside the project: params, --out and --notebook all mean cwd-relative,
    and the notebook is handed absolute paths (the probe notebook writes into out_dir)."""
    probe = root / "tests" / "fixtures" / "sweep_probe.ipynb"
    (tmp_path / "nb.ipynb").write_text(probe.read_text())
    (tmp_path / "mine.yaml").write_text("extends: base\nname: mine\nsubruns: 1\n")
    r = mbb(
        "sweep",
        "mine.yaml",
        "--seeds",
        "0..0",
        "--notebook",
        "nb.ipynb",
        "--out",
        "sw",
        "--quiet",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr + r.stdout
    assert (tmp_path / "sw" / "mine" / "nb.ipynb").is_file()
    assert (tmp_path / "sw" / "mine" / "tables" / "rounds.parquet").is_file()
    r = mbb(
        "notebook",
        "nb.ipynb",
        "--params",
        "mine.yaml",
        "--out",
        "nbout",
        "--runs",
        "1",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    executed = json.loads((tmp_path / "nbout" / "nb.ipynb").read_text())
    injected = "".join(
        "".join(c["source"])
        for c in executed["cells"]
        if "injected-parameters" in c["metadata"].get("tags", [])
    )
    assert str(tmp_path / "mine.yaml") in injected and str(tmp_path / "nbout") in injected
    assert not (root / "outputs" / "mine").exists()

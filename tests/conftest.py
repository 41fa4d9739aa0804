"""Shared fixtures: small, fast conditions and a cached base batch."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from mbb.batch.build import load_params
from mbb.core.paths import PROJECT_ROOT
from mbb.params import Condition

LOCAL_LLM_ENV = "MBB_LOCAL_LLM"


def pytest_configure(config):
    """Give the test process the SIGINT a terminal gives. A shell that starts a job in the
    background (`nohup .ci/run &`) hands it SIGINT ignored; Python then keeps it ignored and
    every child inherits that, so the Ctrl-C tests would see no KeyboardInterrupt and fail
    for a reason that is not mbb's. Tests of an inherited ignored SIGINT set it themselves."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    """`local_llm` tests (the real llama.cpp server) run only with MBB_LOCAL_LLM=1 (CI sets it);
    otherwise they are deselected — not skipped: a laptop without the model reports nothing,
    and a run that asked for them never turns a missing server into a skip."""
    if os.environ.get(LOCAL_LLM_ENV) == "1":
        return
    drop = [it for it in items if it.get_closest_marker("local_llm") is not None]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [it for it in items if it.get_closest_marker("local_llm") is None]


@pytest.fixture(scope="session")
def root() -> Path:
    return PROJECT_ROOT


@pytest.fixture(scope="session")
def base() -> Condition:
    return load_params(PROJECT_ROOT / "params" / "base.yaml")


@pytest.fixture(scope="session")
def base_batch(base, tmp_path_factory):
    from mbb.batch.runner import run_many

    out = tmp_path_factory.mktemp("base_batch")
    return run_many(base, runs=3, out_dir=out, processes=1).check()

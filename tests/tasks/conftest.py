"""Shared fixtures for the real-task path: one suite build per session, fresh resources."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from mbb.core.agent_api import WindowGrant
from mbb.core.eventlog import EventLog
from mbb.resource.resource import ExecutionResource
from mbb.tasks.suite import Suite, build_suite, default_cache_dir


@pytest.fixture(scope="session")
def suite() -> Suite:
    """Built once per session into $MBB_TASK_CACHE or the default cache (idempotent)."""
    cache = Path(os.environ.get("MBB_TASK_CACHE") or default_cache_dir())
    t0 = time.monotonic()
    s = build_suite(cache)
    print(f"\nsuite: {len(s.tasks)} tasks, rebuilt {len(s.rebuilt)}, {time.monotonic() - t0:.1f}s")
    return s


class Env:
    """A resource with an event log, plus helpers to read back what was recorded."""

    def __init__(self, root: Path, time_model: str = "virtual") -> None:
        self.log = EventLog("test", root / "events.jsonl")
        self.resource = ExecutionResource(
            root / "res",
            emit=self.log.emit,
            time_model=time_model,  # type: ignore[arg-type]
        )

    def events(self, kind: str) -> list[dict]:
        return [json.loads(x) for x in self.log.by_kind[kind]]

    def last(self, kind: str = "command") -> dict:
        return self.events(kind)[-1]

    def grant(self, worker: str, length: float = 1000.0, start: float = 0.0) -> WindowGrant:
        g = WindowGrant(worker, 0, 1, start, int(length), start + length)
        self.resource.open_window(g)
        return g


@pytest.fixture
def env(tmp_path: Path) -> Env:
    e = Env(tmp_path)
    yield e
    e.log.close()


@pytest.fixture
def measured_env(tmp_path: Path) -> Env:
    e = Env(tmp_path, "measured")
    yield e
    e.log.close()

"""Workers of one study share one cache file; opening it together must not fail.

CI once failed a three-model sweep because two papermill kernels opened the cache in the same
instant and SQLite refused the switch to WAL with "database is locked" without waiting.
"""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from pathlib import Path

import pytest

from mbb.core.errors import LlmCacheError
from mbb.llm import cache as cache_module
from mbb.llm.cache import LlmCache


def _open_and_write(path: Path, worker: int, barrier, results) -> None:
    barrier.wait()
    try:
        cache = LlmCache(path, "read_write")
        for k in range(3):
            cache.put(f"{worker}-{k}", {"model": "m"}, {"k": k})
        cache.close()
        results.put(None)
    except Exception as exc:  # the test reports whatever a worker met
        results.put(repr(exc))


def test_workers_that_open_one_new_cache_together_all_get_it(tmp_path) -> None:
    ctx = mp.get_context("fork")
    workers, rounds = 6, 100
    failures: list[str] = []
    for round_ in range(rounds):
        path = tmp_path / f"{round_}.sqlite"
        barrier, results = ctx.Barrier(workers), ctx.Queue()
        procs = [
            ctx.Process(target=_open_and_write, args=(path, w, barrier, results))
            for w in range(workers)
        ]
        for p in procs:
            p.start()
        failures += [r for r in (results.get(timeout=120) for _ in procs) if r]
        for p in procs:
            p.join()
        if not failures:
            assert len(LlmCache(path, "replay")) == workers * 3
    assert failures == []


def test_a_lock_met_while_opening_is_waited_out(tmp_path, monkeypatch) -> None:
    real = LlmCache._connect
    refusals = iter(range(3))

    def locked_three_times(self: LlmCache) -> sqlite3.Connection:
        if next(refusals, None) is not None:
            raise sqlite3.OperationalError("database is locked")
        return real(self)

    monkeypatch.setattr(LlmCache, "_connect", locked_three_times)
    cache = LlmCache(tmp_path / "c.sqlite", "read_write")
    cache.put("k", {"model": "m"}, {"ok": True})
    assert cache.get("k") == {"ok": True}
    assert next(refusals, None) is None


def test_a_lock_that_never_lifts_is_a_one_line_error_naming_the_file(tmp_path, monkeypatch):
    def always_locked(self: LlmCache) -> sqlite3.Connection:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(LlmCache, "_connect", always_locked)
    monkeypatch.setattr(cache_module, "_LOCK_WAIT_S", 0.05)
    with pytest.raises(LlmCacheError, match=r"c\.sqlite: the LLM cache stayed locked") as err:
        LlmCache(tmp_path / "c.sqlite", "read_write")
    assert "\n" not in str(err.value)


def test_a_file_that_is_not_sqlite_is_not_retried(tmp_path, monkeypatch) -> None:
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"not a database at all, just bytes" * 100)
    monkeypatch.setattr(cache_module, "_LOCK_WAIT_S", 60.0)
    with pytest.raises(LlmCacheError, match="not a usable SQLite database"):
        LlmCache(path, "read_write")

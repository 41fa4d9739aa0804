"""Run a condition for many seeds (both cores when there are many), then write its tables.

Layout: `<out>/<run_id>/events.jsonl` + `meta.json` per run, and `<out>/tables/*.parquet` with
all runs of the condition. Worker processes return their runs' event lines grouped by kind, so
the tables are parsed once for the whole batch rather than once per run.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from mbb.arena import RunResult, run_condition, run_id_for, run_seeds, uses_llm
from mbb.params import Condition
from mbb.provenance import provenance
from mbb.tables import tables_from_lines, write_tables

__all__ = ["BatchResult", "run_many", "write_meta"]

PARALLEL_FROM = 8  # below this many runs, process start-up costs more than it saves


@dataclass
class BatchResult:
    condition: str
    out_dir: Path
    run_ids: list[str]
    failed: dict[str, str]
    tables: dict[str, pl.DataFrame]
    seconds: float
    by_kind: dict[str, list[str]] = field(default_factory=dict, repr=False)

    def check(self) -> BatchResult:
        """Raise if any run failed (notebooks call this so a failure fails the notebook)."""
        if self.failed:
            lines = "\n".join(f"  {rid}: {err}" for rid, err in self.failed.items())
            raise RuntimeError(f"{len(self.failed)} run(s) of {self.condition} failed:\n{lines}")
        return self

    @property
    def run_dirs(self) -> list[Path]:
        return [self.out_dir / r for r in self.run_ids]


def write_meta(result: RunResult, condition: Condition, wall_s: float) -> Path:
    """meta.json beside a run's events: params snapshot, seed, provenance, size, wall time."""
    assert result.out_dir is not None
    meta = {
        "run_id": result.run_id,
        "condition": condition.name,
        "seed": result.seed,
        "status": result.status,
        "events": len(result.log.lines),
        "wall_s": round(wall_s, 4),
        "params": condition.model_dump(mode="json"),
        "provenance": provenance(),
    }
    path = result.out_dir / "meta.json"
    path.write_text(json.dumps(meta, indent=1))
    return path


def _run_chunk(
    condition_json: str, seeds: Sequence[int], out_dir: str | None
) -> tuple[list[tuple[str, str | None]], dict[str, list[str]]]:
    condition = Condition.model_validate_json(condition_json)
    out = Path(out_dir) if out_dir else None
    by_kind: dict[str, list[str]] = defaultdict(list)
    runs: list[tuple[str, str | None]] = []
    outcomes: list[RunResult | BaseException] = []
    walls: list[float] = []
    if uses_llm(condition):
        # LLM runs wait on the network: the chunk's seeds run concurrently on one event loop,
        # sharing one client (one concurrency limit per endpoint) and one cache; their walls
        # overlap, so each gets the chunk's wall time divided evenly
        t0 = time.perf_counter()
        outcomes = run_seeds(condition, seeds, out)
        walls = [(time.perf_counter() - t0) / max(1, len(seeds))] * len(seeds)
    else:
        for seed in seeds:
            t0 = time.perf_counter()
            try:
                outcomes.append(run_condition(condition, seed, out))
            except Exception as exc:  # isolated: the batch goes on, the failure is reported
                outcomes.append(exc)
            walls.append(time.perf_counter() - t0)
    for seed, result, wall in zip(seeds, outcomes, walls, strict=True):
        if isinstance(result, Exception):
            runs.append((run_id_for(condition.name, seed), f"{type(result).__name__}: {result}"))
            continue
        if isinstance(result, BaseException):  # KeyboardInterrupt and the like: not isolated
            raise result
        for k, lines in result.log.by_kind.items():
            by_kind[k].extend(lines)
        if out is not None and result.out_dir is not None:
            write_meta(result, condition, wall)
        runs.append((result.run_id, None))
    return runs, by_kind


def run_many(
    condition: Condition,
    *,
    seed: int | None = None,
    runs: int = 1,
    out_dir: Path | None = None,
    processes: int | None = None,
    progress: bool | Callable[[int], Any] = False,
    write: bool = True,
) -> BatchResult:
    """Run seeds seed..seed+runs-1; returns run ids, failures and the combined tables."""
    t0 = time.perf_counter()
    first = condition.seed if seed is None else seed
    seeds = list(range(first, first + runs))
    llm = uses_llm(condition)
    if processes is None:
        processes = min(os.cpu_count() or 1, 2) if runs >= PARALLEL_FROM and not llm else 1
    cjson = condition.model_dump_json()
    out = str(out_dir) if out_dir is not None else None
    chunk = max(1, min(25, runs // (processes * 4) or 1))
    if llm and processes <= 1:
        chunk = runs  # one event loop for all seeds: one rate limit, one cache
    chunks = [seeds[i : i + chunk] for i in range(0, len(seeds), chunk)]
    bar = None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=runs, desc=condition.name, unit="run")
    results: list[tuple[list[tuple[str, str | None]], dict[str, list[str]]]] = []

    def _done(n: int) -> None:
        if bar is not None:
            bar.update(n)
        elif callable(progress):
            progress(n)

    if processes <= 1:
        for ch in chunks:
            results.append(_run_chunk(cjson, ch, out))
            _done(len(ch))
    else:
        ctx = mp.get_context("spawn")  # polars and tqdm threads make fork unsafe
        with ProcessPoolExecutor(max_workers=processes, mp_context=ctx) as pool:
            futures = [pool.submit(_run_chunk, cjson, ch, out) for ch in chunks]
            for fut, ch in zip(futures, chunks, strict=True):
                results.append(fut.result())
                _done(len(ch))
    if bar is not None:
        bar.close()
    by_kind: dict[str, list[str]] = defaultdict(list)
    run_ids, failed = [], {}
    for runs_, kinds in results:
        for rid, err in runs_:
            if err is None:
                run_ids.append(rid)
            else:
                failed[rid] = err
        for k, lines in kinds.items():
            by_kind[k].extend(lines)
    tables = tables_from_lines(by_kind)
    if write and out_dir is not None:
        write_tables(tables, out_dir / "tables")
    return BatchResult(
        condition=condition.name,
        out_dir=out_dir or Path("."),
        run_ids=run_ids,
        failed=failed,
        tables=tables,
        seconds=time.perf_counter() - t0,
        by_kind=dict(by_kind),
    )

"""Run a condition for many seeds (both cores when there are many), then write its tables.

Layout: `<out>/<run_id>/events.jsonl` + `meta.json` per run, and `<out>/tables/*.parquet` with
all runs of the condition. Worker processes return their runs' event lines grouped by kind, so
the tables are parsed once for the whole batch rather than once per run.
"""

from __future__ import annotations

import errno
import json
import multiprocessing as mp
import os
import signal
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from mbb.arena import RunResult, run_condition, run_id_for, run_seeds, uses_llm
from mbb.events import EventLogError, kind_of, read_lines
from mbb.outdir import claim
from mbb.params import Condition
from mbb.provenance import provenance
from mbb.tables import tables_from_lines, write_tables

__all__ = ["BatchInterrupted", "BatchResult", "finished_log", "run_many", "write_meta"]

PARALLEL_FROM = 8  # below this many runs, process start-up costs more than it saves
MAX_RUNS = 100_000  # runs in one batch (checked before anything is allocated)
MAX_PROCESSES = 64
# the machine, not the run: these stop the batch instead of being recorded as one failed run
_FATAL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


class BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C during `run_many`: the runs that finished are kept (and their tables written);
    running the same batch again with `skip_done=True` (`mbb run`) finishes the rest."""

    def __init__(self, condition: str, done: int, total: int, tables_dir: Path | None) -> None:
        super().__init__(f"{done} of {total} run(s) of {condition!r} finished")
        self.condition, self.done, self.total, self.tables_dir = condition, done, total, tables_dir


@dataclass
class BatchResult:
    condition: str
    out_dir: Path
    run_ids: list[str]
    failed: dict[str, str]
    tables: dict[str, pl.DataFrame]
    seconds: float
    by_kind: dict[str, list[str]] = field(default_factory=dict, repr=False)
    skipped: int = 0  # runs already finished in out_dir, kept (skip_done=True)

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


def finished_log(run_dir: Path) -> list[str] | None:
    """The verified lines of a run that completed, or None (absent, unfinished, failed, or a log
    that does not check); a missing meta.json (interrupted before it was written) is rebuilt
    from the log."""
    path = run_dir / "events.jsonl"
    if not path.is_file():
        return None
    try:
        lines = read_lines(path)
    except EventLogError:
        return None
    if not lines or not lines[-1].startswith('{"kind":"run_ended"'):
        return None
    last = json.loads(lines[-1])
    if last.get("status") != "completed" or run_dir.name != last.get("run_id"):
        return None
    meta = run_dir / "meta.json"
    if not meta.is_file():
        first = json.loads(lines[0])
        d = {
            "run_id": first["run_id"],
            "condition": first["condition"],
            "seed": first["seed"],
            "status": "completed",
            "events": len(lines),
            "wall_s": None,  # not measured: the batch writing it was interrupted
            "params": first["params"],
            "provenance": first["provenance"],
        }
        meta.write_text(json.dumps(d, indent=1))
    return lines


def _ignore_sigint() -> None:
    """Pool workers leave Ctrl-C to the parent, which stops the batch (no traceback per
    worker); a chunk already running finishes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


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
                if isinstance(exc, OSError) and exc.errno in _FATAL_ERRNOS:
                    raise  # a full disk fails every run: stop the batch, say it once
                outcomes.append(exc)
            walls.append(time.perf_counter() - t0)
    for seed, result, wall in zip(seeds, outcomes, walls, strict=True):
        if isinstance(result, OSError) and result.errno in _FATAL_ERRNOS:
            raise result  # a full disk fails every run: stop the batch, say it once
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
    skip_done: bool = False,
) -> BatchResult:
    """Run seeds seed..seed+runs-1; returns run ids, failures and the combined tables.

    With `out_dir`, the folder is claimed for the batch (`mbb.outdir.claim`: one writer, one
    condition). `skip_done` keeps runs that already finished there (verified logs) instead of
    running them again. Ctrl-C raises `BatchInterrupted` after writing the tables of the runs
    that finished."""
    if type(runs) is not int or not 1 <= runs <= MAX_RUNS:
        raise ValueError(f"runs must be a whole number from 1 to {MAX_RUNS}, got {runs!r}")
    if processes is not None and (
        type(processes) is not int or not 1 <= processes <= MAX_PROCESSES
    ):
        raise ValueError(
            f"processes must be a whole number from 1 to {MAX_PROCESSES}, got {processes!r}"
        )
    if out_dir is None:
        return _run_many(condition, seed, runs, None, processes, progress, write, False)
    with claim(out_dir, condition):
        return _run_many(condition, seed, runs, out_dir, processes, progress, write, skip_done)


def _run_many(
    condition: Condition,
    seed: int | None,
    runs: int,
    out_dir: Path | None,
    processes: int | None,
    progress: bool | Callable[[int], Any],
    write: bool,
    skip_done: bool,
) -> BatchResult:
    t0 = time.perf_counter()
    first = condition.seed if seed is None else seed
    all_seeds = list(range(first, first + runs))
    kept: dict[str, list[str]] = {}  # run id -> lines of runs already finished
    if skip_done and out_dir is not None:
        for s in all_seeds:
            rid = run_id_for(condition.name, s)
            lines = finished_log(out_dir / rid)
            if lines is not None:
                kept[rid] = lines
    seeds = [s for s in all_seeds if run_id_for(condition.name, s) not in kept]
    runs = len(seeds)
    llm = uses_llm(condition)
    if processes is None:
        processes = min(os.cpu_count() or 1, 2) if runs >= PARALLEL_FROM and not llm else 1
    cjson = condition.model_dump_json()
    out = str(out_dir) if out_dir is not None else None
    chunk = max(1, min(25, runs // (processes * 4) or 1))
    if llm and processes <= 1:
        chunk = max(1, runs)  # one event loop for all seeds: one rate limit, one cache
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

    try:
        if processes <= 1:
            for ch in chunks:
                results.append(_run_chunk(cjson, ch, out))
                _done(len(ch))
        else:
            ctx = mp.get_context("spawn")  # polars and tqdm threads make fork unsafe
            with ProcessPoolExecutor(
                max_workers=processes, mp_context=ctx, initializer=_ignore_sigint
            ) as pool:
                try:
                    futures = [pool.submit(_run_chunk, cjson, ch, out) for ch in chunks]
                    for fut, ch in zip(futures, chunks, strict=True):
                        results.append(fut.result())
                        _done(len(ch))
                except BaseException:
                    pool.shutdown(wait=True, cancel_futures=True)  # running chunks finish
                    raise
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        _interrupted(condition, all_seeds, out_dir, write)
    if bar is not None:
        bar.close()
    by_kind: dict[str, list[str]] = defaultdict(list)
    for lines in kept.values():
        for line in lines:
            by_kind[kind_of(line)].append(line)
    run_ids, failed = list(kept), {}
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
        skipped=len(kept),
    )


def _interrupted(
    condition: Condition, seeds: Sequence[int], out_dir: Path | None, write: bool
) -> None:
    """After Ctrl-C: tables of the runs that finished (read back from their verified logs), then
    `BatchInterrupted`. A run cut short keeps its partial log (`mbb resume` continues it)."""
    done: dict[str, list[str]] = {}
    tables_dir = None
    if out_dir is not None:
        for s in seeds:
            rid = run_id_for(condition.name, s)
            lines = finished_log(out_dir / rid)
            if lines is not None:
                done[rid] = lines
        if write and done:
            by_kind: dict[str, list[str]] = defaultdict(list)
            for lines in done.values():
                for line in lines:
                    by_kind[kind_of(line)].append(line)
            tables_dir = out_dir / "tables"
            write_tables(tables_from_lines(by_kind), tables_dir)
    raise BatchInterrupted(condition.name, len(done), len(seeds), tables_dir)

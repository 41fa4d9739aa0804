"""Run a condition for many seeds (both cores when there are enough), then write its tables.

Layout: `<out>/<run_id>/events.jsonl` + `meta.json` per run, and `<out>/tables/*.parquet` with
all runs of the condition. Seeds run in chunks; each chunk returns its runs' event lines grouped
by kind and the tables parsed from them, so parsing is spread over the workers too and the
batch's tables are one concatenation.

Processes: one pool per process, started at the first parallel batch and reused by every later
one (a sweep or a notebook calling `run_many` again pays no start-up), shut down at exit.
Workers import only the arena and the tables (`import mbb` is lazy), so they start in well under
a second. The pool's size follows the CPUs this process may use and what others keep busy
(`mbb.batch.cpus`): one process whenever a pool would not pay.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import multiprocessing as mp
import signal
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from mbb.agents.backends import uses_llm
from mbb.batch.build import load_params, run_condition, run_seeds
from mbb.batch.cpus import PARALLEL_FROM, cpu_budget, pool_size
from mbb.batch.outdir import claim, replace_file
from mbb.batch.runs import check_not_foreign, run_id_of
from mbb.core.aio import sigint_deferred
from mbb.core.eventlog import EventLogError, kind_of, read_lines
from mbb.core.paths import user_path
from mbb.core.provenance import provenance
from mbb.core.tables import concat_tables, tables_from_lines, write_tables
from mbb.core.validity import INVALID_SHARE, invalid_reason, run_validity
from mbb.params import Condition
from mbb.protocol.arena import RunResult

__all__ = [
    "BatchInterrupted",
    "BatchResult",
    "BatchWorkerDied",
    "finished_log",
    "run_conditions",
    "run_many",
    "shutdown_pool",
    "write_meta",
]

MAX_CHUNK = 8  # seeds per task: progress shows within a second, the cores stay balanced
MAX_RUNS = 100_000  # runs in one batch (checked before anything is allocated)
MAX_PROCESSES = 64
# the machine, not the run: these stop the batch instead of being recorded as one failed run
_FATAL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})

ChunkResult = tuple[list[tuple[str, str | None]], dict[str, list[str]], dict[str, pl.DataFrame]]


# what a script that calls run_many at its top level, unguarded, is told (the worker processes
# are spawned: each runs the script's top level again while it starts)
UNGUARDED = (
    "run_many was called while one of its worker processes was starting: a script that runs "
    'batches with processes > 1 must put its calls under `if __name__ == "__main__":` '
    "(each worker process imports the script)"
)


class BatchWorkerDied(RuntimeError):
    """A worker process of a batch died before it gave back its runs (killed, out of memory,
    or a script's unguarded call: `UNGUARDED`). The runs that finished are in the folder;
    `mbb run` with the same arguments (`skip_done`) runs the rest."""


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
    def stopped(self) -> dict[str, str]:
        """Runs ended by a spend cap (recorded and resumable; not failures): run id -> why."""
        out = {}
        for line in self.by_kind.get("run_ended", []):
            d = json.loads(line)
            if d.get("status") == "stopped":
                out[d["run_id"]] = d.get("error") or "stopped"
        return out

    @property
    def run_dirs(self) -> list[Path]:
        return [self.out_dir / r for r in self.run_ids]


def _validity_fields(lines: Sequence[str], invalid_share: float) -> dict[str, Any]:
    """meta.json's `valid`, `invalid_reason` and `validity` for a run's log lines."""
    validity = run_validity(lines, invalid_share)
    return {
        "valid": validity["valid"],
        "invalid_reason": invalid_reason(validity),
        "validity": validity,
    }


def write_meta(
    result: RunResult, condition: Condition, wall_s: float, invalid_share: float = INVALID_SHARE
) -> Path:
    """meta.json beside a run's events: params snapshot, seed, provenance, size, wall time, and
    whether the run is valid (`run_validity` at `invalid_share`: `valid`, `invalid_reason`)."""
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
        **_validity_fields(result.log.lines, invalid_share),
    }
    path = result.out_dir / "meta.json"
    replace_file(path, json.dumps(meta, indent=1))
    return path


def finished_log(run_dir: Path) -> list[str] | None:
    """The verified lines of a run that completed, or None (absent, unfinished, failed, or a log
    that does not check); a missing meta.json (interrupted before it was written) is rebuilt
    from the log. A run folder that is a link is no finished run of this folder: the meta.json
    would be written into whatever it points at."""
    path = run_dir / "events.jsonl"
    if run_dir.is_symlink() or not path.is_file():
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
    if not meta.is_file() or meta.is_symlink():
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
            # mbb's default threshold: the batch that knew the study's was interrupted
            **_validity_fields(lines, INVALID_SHARE),
        }
        replace_file(meta, json.dumps(d, indent=1))
    return lines


def _run_chunk(
    condition_json: str,
    seeds: Sequence[int],
    out_dir: str | None,
    on_call: Callable[..., Any] | None = None,
    on_run: Callable[[], Any] | None = None,
) -> ChunkResult:
    """Run `seeds` (in this process or a pool worker) and return their lines and tables.
    `on_call`, `on_run`: progress per LLM call and per finished LLM run (in-process only)."""
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
        outcomes = run_seeds(condition, seeds, out, on_call=on_call, on_run=on_run)
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
            runs.append((run_id_of(condition, seed), f"{type(result).__name__}: {result}"))
            continue
        if isinstance(result, BaseException):  # KeyboardInterrupt and the like: not isolated
            raise result
        for k, lines in result.log.by_kind.items():
            by_kind[k].extend(lines)
        if out is not None and result.out_dir is not None:
            write_meta(result, condition, wall)
        runs.append((result.run_id, None))
    return runs, by_kind, tables_from_lines(by_kind)


class _Progress:
    """A batch's progress: a tqdm bar of runs (`progress=True`), or a callback given the runs
    just finished. For LLM runs the bar counts calls as they end (a run can take minutes) and
    says how many runs have finished; after Ctrl-C `finish` sets it to the count the message
    gives, so the two never disagree."""

    def __init__(
        self,
        progress: bool | Callable[[int], Any],
        name: str,
        total: int,
        kept: int,
        llm: bool,
    ) -> None:
        self.callback = progress if callable(progress) else None
        self.total, self.done, self.calls, self.failed_calls, self.llm = total, kept, 0, 0, llm
        self.bar: Any = None
        if progress is True:
            from tqdm.auto import tqdm

            if llm:
                self.bar = tqdm(desc=self._desc(name), unit="call", total=None)
            else:
                self.bar = tqdm(desc=name, total=total, initial=kept, unit="run")
        self.name = name

    def _desc(self, name: str) -> str:
        return f"{name}: {self.done}/{self.total} runs"

    def call(self, meta: Any, result: Any, error: str | None) -> None:
        """One LLM call ended (`LlmClient`'s `on_call`)."""
        self.calls += 1
        self.failed_calls += error is not None
        if self.bar is not None:
            if self.failed_calls:
                self.bar.set_postfix_str(f"{self.failed_calls} failed", refresh=False)
            self.bar.update(1)

    def runs(self, n: int) -> None:
        """`n` runs ended."""
        self.done += n
        if self.bar is not None:
            if self.llm:
                self.bar.set_description_str(self._desc(self.name))
            else:
                self.bar.update(n)
        elif self.callback is not None:
            self.callback(n)

    def finish(self, done: int) -> None:
        """The batch stopped with `done` runs finished (kept ones included): the bar says so."""
        if self.bar is not None:
            if self.llm:
                self.done = done
                self.bar.set_description_str(self._desc(self.name))
            else:
                self.bar.n = done
                self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


_pool: ProcessPoolExecutor | None = None
_pool_size = 0


def _worker_start() -> None:
    """Worker start-up: import what every chunk needs before the first task arrives, leave
    Ctrl-C to the parent for good, which stops the batch (no traceback per worker), and go with
    the parent if it dies, even SIGKILLed (the SIGTERM the kernel then sends reaps what the
    worker held: `mbb.resource.reaper`).

    A worker is born with SIGINT blocked (`_sigint_held`), so a Ctrl-C that lands while it
    starts and imports is held, not raised; ignoring SIGINT here discards it (polars, imported
    first, installs a native SIGINT handler, which the ignore replaces), and the block is lifted."""
    import mbb.core.tables  # noqa: F401  (polars and the schemas: every chunk needs them)
    from mbb.resource import reaper

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    reaper.die_with_parent()


@contextlib.contextmanager
def _sigint_held() -> Iterator[None]:
    """Ctrl-C held while worker processes are started, then acted on.

    SIGINT is blocked in this thread, so a spawned worker inherits the mask through fork and
    exec and no Ctrl-C can interrupt it before `_worker_start` ignores SIGINT. (Inheriting the
    disposition would not do: a caught signal is reset to the default by exec, and polars
    catches SIGINT natively even in a process started with it ignored.) The mask alone does not
    hold it here, so the handler is deferred too (`sigint_deferred`): a Ctrl-C between fork and
    the data a worker reads would leave an EOFError traceback in the worker."""
    with sigint_deferred():
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _get_pool(processes: int) -> ProcessPoolExecutor:
    global _pool, _pool_size
    if _pool is None or _pool_size != processes:
        shutdown_pool()
        ctx = mp.get_context("spawn")  # polars and tqdm threads make fork unsafe
        _pool = ProcessPoolExecutor(
            max_workers=processes, mp_context=ctx, initializer=_worker_start
        )
        _pool_size = processes
    return _pool


def shutdown_pool(kill: bool = False) -> None:
    """Stop the worker processes (at exit, or `kill=True` at once, e.g. after Ctrl-C).

    `kill`: terminate workers mid-chunk instead of letting them finish what they hold (a run cut
    short keeps its partial log; `finished_log` never counts it)."""
    global _pool
    pool, _pool = _pool, None
    if pool is None:
        return
    if kill:
        # ProcessPoolExecutor has no public terminate before Python 3.14
        procs = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
    else:
        pool.shutdown(wait=True, cancel_futures=True)


atexit.register(shutdown_pool)


def run_many(
    condition: Condition,
    *,
    seed: int | None = None,
    runs: int = 1,
    out_dir: str | Path | None = None,
    processes: int | None = None,
    progress: bool | Callable[[int], Any] = False,
    write: bool = True,
    skip_done: bool = False,
) -> BatchResult:
    """Run seeds seed..seed+runs-1; returns run ids, failures and the combined tables.

    `condition`: what to run; `seed`: the first seed (default: the condition's); `runs`: how
    many seeds; `out_dir`: where run folders and tables go (a str or a Path, `~` expanded; None:
    nothing written);
    `processes`: worker processes (None: `mbb.batch.cpus.pool_size`: one per CPU that is
    really free, from `PARALLEL_FROM` scripted runs on, else one); `progress`: a tqdm bar
    (True) or a callback given the number of runs just finished;
    `write`: write `<out_dir>/tables/`; `skip_done`: see below.

    With `out_dir`, the folder is claimed for the batch (`mbb.batch.outdir.claim`: one writer, one
    condition). `skip_done` keeps runs that already finished there (verified logs) instead of
    running them again. Ctrl-C raises `BatchInterrupted` after writing the tables of the runs
    that finished."""
    if getattr(mp.current_process(), "_inheriting", False):  # a spawned worker's start-up
        raise RuntimeError(UNGUARDED)
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
    folder = user_path(out_dir)
    with claim(folder, condition):
        return _run_many(condition, seed, runs, folder, processes, progress, write, skip_done)


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
    if out_dir is not None:
        for s in all_seeds:
            rid = run_id_of(condition, s)
            # a run of other parameters is refused before any run starts
            check_not_foreign(out_dir / rid, condition)
            if skip_done and (lines := finished_log(out_dir / rid)) is not None:
                kept[rid] = lines
    seeds = [s for s in all_seeds if run_id_of(condition, s) not in kept]
    runs = len(seeds)
    llm = uses_llm(condition)
    if processes is None:  # the CPUs really free now (affinity, cgroup quota, load): cpus.py
        processes = 1 if llm or runs < PARALLEL_FROM else pool_size(runs, cpu_budget())
    cjson = condition.model_dump_json()
    out = str(out_dir) if out_dir is not None else None
    chunk = max(1, min(MAX_CHUNK, runs // (processes * 4) or 1))
    if llm and processes <= 1:
        chunk = max(1, runs)  # one event loop for all seeds: one rate limit, one cache
    chunks = [seeds[i : i + chunk] for i in range(0, len(seeds), chunk)]
    bar = _Progress(progress, condition.name, len(all_seeds), len(kept), llm)
    results: dict[int, ChunkResult] = {}

    try:
        if processes <= 1:
            for i, ch in enumerate(chunks):
                if llm:  # progress per call and per run, from this process's event loop
                    results[i] = _run_chunk(cjson, ch, out, bar.call, lambda: bar.runs(1))
                else:
                    results[i] = _run_chunk(cjson, ch, out)
                    bar.runs(len(ch))
        else:
            pool = _get_pool(processes)
            pending: dict[Future[ChunkResult], int] = {}
            try:
                with _sigint_held():  # a worker process is started by its first submit
                    for i, ch in enumerate(chunks):
                        pending[pool.submit(_run_chunk, cjson, ch, out)] = i
                while pending:
                    finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        i = pending.pop(fut)
                        try:
                            results[i] = fut.result()
                        except BrokenProcessPool as exc:
                            raise BatchWorkerDied(
                                f"a worker process of the batch of {condition.name!r} died "
                                "before it gave back its runs (killed, out of memory, or a "
                                "script that calls run_many without `if __name__ == "
                                '"__main__":`)'
                                + (
                                    f"; the runs that finished are kept in {out_dir}"
                                    if out_dir
                                    else ""
                                )
                            ) from exc
                        bar.runs(len(chunks[i]))
            except BaseException:
                # queued chunks are cancelled; the running ones (at most MAX_CHUNK seeds each,
                # workers ignore Ctrl-C) finish, so no run is cut short and the pool ends cleanly
                shutdown_pool()
                raise
    except KeyboardInterrupt:
        try:
            _interrupted(condition, all_seeds, out_dir, write, bar)
        finally:
            bar.close()
    bar.close()
    by_kind: dict[str, list[str]] = defaultdict(list)
    for lines in kept.values():
        for line in lines:
            by_kind[kind_of(line)].append(line)
    parts = [tables_from_lines(by_kind)] if kept else []
    run_ids, failed = list(kept), {}
    for i in sorted(results):
        runs_, kinds, chunk_tables = results[i]
        for rid, err in runs_:
            if err is None:
                run_ids.append(rid)
            else:
                failed[rid] = err
        for k, lines in kinds.items():
            by_kind[k].extend(lines)
        parts.append(chunk_tables)
    tables = concat_tables(parts)
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
    condition: Condition,
    seeds: Sequence[int],
    out_dir: Path | None,
    write: bool,
    bar: _Progress | None = None,
) -> None:
    """After Ctrl-C: tables of the runs that finished (read back from their verified logs), then
    `BatchInterrupted`; the progress bar is set to the same count first. A run cut short keeps
    its partial log (`mbb resume` continues it)."""
    done: dict[str, list[str]] = {}
    tables_dir = None
    if out_dir is not None:
        for s in seeds:
            rid = run_id_of(condition, s)
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
    # without a folder there is no log to read back: the runs the batch saw end
    n_done = len(done) if out_dir is not None else (bar.done if bar is not None else 0)
    if bar is not None:
        bar.finish(n_done)
    raise BatchInterrupted(condition.name, n_done, len(seeds), tables_dir)


def run_conditions(
    params_paths: Sequence[str | Path],
    *,
    runs: int,
    out_root: str | Path,
    overrides: dict[str, Any] | None = None,
    seed: int | None = None,
) -> list[Path]:
    """Run each params file (same overrides, deep-merged) into `<out_root>/<condition>` and
    return the condition folders, for `mbb.analysis.runs.load_runs` and the analyses.

    params_paths: the conditions' params files (or bare names of mbb's own);
    runs: seeds per condition (seed..seed+runs-1);
    out_root: the folder that receives one folder per condition;
    overrides: params deep-merged into every condition (e.g. `{"subruns": 2}`);
    seed: the first seed (default: each condition's own).

    Runs are always redone rather than read back, so a notebook's numbers never come from a
    stale folder left by another parameter set (a scripted run takes milliseconds)."""
    if not params_paths:
        raise ValueError("run_conditions needs at least one params path")
    dirs = []
    for p in params_paths:
        cond = load_params(p, overrides)
        out = user_path(out_root) / cond.name
        run_many(cond, seed=seed, runs=runs, out_dir=out).check()
        dirs.append(out)
    return dirs

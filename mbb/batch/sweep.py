"""Sweeps: execute notebooks for many conditions x seeds, on this machine or on Dask.

One *job* = one condition's notebook run over a seed range (the notebook runs seeds A..B and
writes `<out>/<condition>/`). Jobs run in in-process worker threads (each papermill execution
starts its own kernel; no `cwd=`, which would `chdir` the whole process), or on a Dask cluster:
a LocalCluster, an existing scheduler address, or a dask-jobqueue cluster object for SLURM/PBS.

Failure isolation: a failing job keeps its notebook (with the traceback), is listed as failed in
`sweep.json` and the report index, and does not stop the others. Skip-if-done: a job whose
`.done` stamp matches its fingerprint (resolved params, seeds, notebook source) is not re-run.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mbb.batch.build import load_params
from mbb.batch.notebooks import execute_notebook
from mbb.core.paths import notebook_file, params_file, user_path

__all__ = ["CallWatcher", "Job", "JobResult", "parse_seeds", "plan_sweep", "run_job", "run_sweep"]

DEFAULT_NOTEBOOK = "run_condition"  # a bare name: mbb's own notebook (mbb.core.paths)


def parse_seeds(text: str) -> tuple[int, int]:
    """'A..B' (inclusive) or 'A' -> (A, B)."""
    try:
        if ".." in text:
            a, b = (int(x) for x in text.split("..", 1))
        else:
            a = b = int(text)
    except ValueError:
        raise ValueError(f"--seeds expects A..B or A (integers), got {text!r}") from None
    if b < a or a < 0:
        raise ValueError(f"--seeds {text!r}: need 0 <= A <= B")
    return a, b


@dataclass(frozen=True)
class Job:
    condition: str
    params_path: str  # absolute
    overrides: dict[str, Any]
    seed_from: int
    seed_to: int
    notebook: str  # absolute
    out_dir: str  # absolute: <sweep out>/<condition> (with a model axis: <condition>-<model>)
    model: str | None = None  # the model config name of this job (a sweep's model axis)

    @property
    def label(self) -> str:
        """The job's name in progress, results and sweep.json: condition, or condition[model]."""
        return self.condition if self.model is None else f"{self.condition}[{self.model}]"

    @property
    def runs(self) -> int:
        return self.seed_to - self.seed_from + 1

    def llm_cache(self) -> Path | None:
        """The LLM cache this job's condition writes, when it has LLM workers and the file
        exists: the sweep's report shows prompts from it (your own params named it; a cache
        named by a folder's logs is read only inside the folder)."""
        from mbb.agents.backends import uses_llm

        cond = load_params(self.params_path, self.overrides)
        path = cond.llm.cache_path()
        return path if uses_llm(cond) and path.is_file() else None

    def fingerprint(self) -> str:
        cond = load_params(self.params_path, self.overrides)
        blob = json.dumps(
            {
                "params": cond.model_dump(mode="json"),
                "seeds": [self.seed_from, self.seed_to],
                "notebook": hashlib.sha256(Path(self.notebook).read_bytes()).hexdigest(),
            },
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class JobResult:
    condition: str
    status: str  # ok | failed | skipped | stopped (a spend cap: run the sweep again to go on)
    seconds: float
    notebook: str
    html: str | None
    error: str | None = None


def plan_sweep(
    params_paths: Iterable[str | Path],
    seeds: tuple[int, int],
    out_dir: str | Path,
    *,
    overrides: dict[str, Any] | None = None,
    notebook: str | Path = DEFAULT_NOTEBOOK,
    models: Sequence[str] | None = None,
) -> list[Job]:
    """One job per params file (x model, with `models`: conditions x models x seeds); conditions
    must have distinct names (they name the folders). Every condition must configure every
    model: an unknown name is refused, with the configured ones listed, before any job runs."""
    from mbb.batch.runs import with_model
    from mbb.params import deep_merge

    out = user_path(out_dir)
    jobs: list[Job] = []
    seen: dict[str, str] = {}
    for p in params_paths:
        path = params_file(p)
        cond = load_params(path, overrides)  # fail fast on a bad file, before any kernel starts
        if cond.name in seen:
            raise ValueError(f"{path} and {seen[cond.name]} both name condition {cond.name!r}")
        seen[cond.name] = str(path)
        choices: list[str | None] = [*models] if models else [None]  # None: the file's model
        for model in choices:
            over = dict(overrides or {})
            folder = cond.name
            if model is not None:
                over = deep_merge(over, with_model(cond, model))
                load_params(path, over)
                folder = f"{cond.name}-{model}"
            jobs.append(
                Job(
                    condition=cond.name,
                    params_path=str(path),
                    overrides=over,
                    seed_from=seeds[0],
                    seed_to=seeds[1],
                    notebook=str(notebook_file(notebook)),
                    out_dir=str(out / folder),
                    model=model,
                )
            )
    return jobs


def _stopped_runs(out: Path) -> list[str]:
    """Runs under `out` whose log ends with a spend-cap stop."""
    from mbb.core.eventlog import read_lines

    stopped = []
    for path in sorted(out.glob("*/events.jsonl")):
        lines = read_lines(path)
        if lines and '"stopped"' in lines[-1]:
            last = json.loads(lines[-1])
            if last.get("kind") == "run_ended" and last.get("status") == "stopped":
                stopped.append(path.parent.name)
    return stopped


def run_job(job: Job, *, skip_done: bool = True) -> JobResult:
    """Execute one job; never raises for a failing notebook (the failure is the result).

    A job whose runs were stopped by a spend cap is "stopped" and gets no `.done` stamp: the
    same sweep run again (with a higher cap) goes on from the cache."""
    from mbb.llm.budget import ledger_for

    out = Path(job.out_dir)
    stamp = out / ".done"
    nb_out = out / Path(job.notebook).name
    html = nb_out.with_suffix(".html")
    fp = job.fingerprint()
    if skip_done and stamp.is_file() and stamp.read_text().strip() == fp and nb_out.is_file():
        return JobResult(job.label, "skipped", 0.0, str(nb_out), str(html))
    stamp.unlink(missing_ok=True)
    shared = ledger_for(None, None)
    why = shared.exhausted() if shared is not None else None
    if why is not None:  # the sweep's cap is spent: not started at all
        return JobResult(job.label, "stopped", 0.0, str(nb_out), None, why)
    t0 = time.perf_counter()
    params = {
        "params_path": job.params_path,
        "overrides": job.overrides,
        "seed": job.seed_from,
        "runs": job.runs,
        "out_dir": job.out_dir,
    }
    try:
        _, page = execute_notebook(job.notebook, out, params)
    except Exception as exc:
        html_path = None
        if nb_out.is_file():  # keep the failed notebook readable as a page too
            try:
                from mbb.batch.report import export_html

                html_path = str(export_html(nb_out))
            except Exception:
                html_path = None
        return JobResult(
            job.label,
            "failed",
            time.perf_counter() - t0,
            str(nb_out),
            html_path,
            f"{type(exc).__name__}: {str(exc).strip()[-1500:]}",
        )
    stopped = _stopped_runs(out)
    if stopped:
        note = f"stopped at the spend cap: {', '.join(stopped)}"
        return JobResult(
            job.label, "stopped", time.perf_counter() - t0, str(nb_out), str(page), note
        )
    stamp.write_text(fp)
    return JobResult(job.label, "ok", time.perf_counter() - t0, str(nb_out), str(page))


def _run_local(
    jobs: Sequence[Job], workers: int, skip_done: bool, done: Callable[[JobResult], None]
) -> list[JobResult]:
    results: list[JobResult] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futs = {pool.submit(run_job, j, skip_done=skip_done): j for j in jobs}
        for fut in as_completed(futs):
            r = fut.result()
            results.append(r)
            done(r)
    return results


def _run_dask(
    jobs: Sequence[Job],
    workers: int,
    skip_done: bool,
    cluster: Any,
    done: Callable[[JobResult], None],
) -> list[JobResult]:
    from distributed import Client, LocalCluster
    from distributed import as_completed as dask_completed

    own_cluster = None
    if cluster in (None, "local"):
        own_cluster = LocalCluster(
            n_workers=max(1, workers),
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
        )
        client = Client(own_cluster)
    elif isinstance(cluster, str):
        client = Client(cluster)  # an existing scheduler, e.g. tcp://host:8786
    else:
        client = Client(cluster)  # e.g. dask_jobqueue.SLURMCluster(...) after .scale(n)
    try:
        futs = [client.submit(run_job, j, skip_done=skip_done, pure=False) for j in jobs]
        results = []
        for fut in dask_completed(futs):
            r = fut.result()
            results.append(r)
            done(r)
        return results
    finally:
        client.close()
        if own_cluster is not None:
            own_cluster.close()


_CALL = b'{"kind":"llm_call"'
_ENDED = b'{"kind":"run_ended"'


class CallWatcher:
    """Counts the LLM calls and finished runs the sweep's kernels write, as they write them:
    every `interval_s` it reads what was appended to each run's `events.jsonl` under the jobs'
    folders (the kernels are other processes: their logs are what is shared). `poll()` once
    reads what is new and returns (calls, runs ended); `start()` polls in a thread and calls
    `on_change(calls, runs)` when a count moved.

    folders: the jobs' output folders; on_change: told the new counts; interval_s: how often."""

    def __init__(
        self,
        folders: Iterable[str | Path],
        on_change: Callable[[int, int], Any] | None = None,
        interval_s: float = 0.5,
    ) -> None:
        import threading

        self.folders = [Path(f) for f in folders]
        self.on_change = on_change
        self.interval_s = interval_s
        self.calls = self.runs = 0
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self) -> tuple[int, int]:
        """Read what the logs gained since the last poll; return the totals."""
        for folder in self.folders:
            for log in folder.glob("*/events.jsonl"):
                at = self._offsets.get(log, 0)
                try:
                    with log.open("rb") as fh:
                        fh.seek(at)
                        chunk = fh.read()
                except OSError:
                    continue
                if not chunk:
                    continue
                self._offsets[log] = at + len(chunk)
                data = self._partial.pop(log, b"") + chunk
                lines = data.split(b"\n")
                if lines[-1]:  # a line still being written: counted when it ends
                    self._partial[log] = lines[-1]
                for line in lines[:-1]:
                    self.calls += line.startswith(_CALL)
                    self.runs += line.startswith(_ENDED)
        return self.calls, self.runs

    def _loop(self) -> None:
        last = (-1, -1)
        while not self._stop.wait(self.interval_s):
            now = self.poll()
            if now != last and self.on_change is not None:
                self.on_change(*now)
            last = now

    def start(self) -> CallWatcher:
        import threading

        self._thread = threading.Thread(target=self._loop, name="mbb-sweep-calls", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling, after one last read (so the final counts are whole)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        now = self.poll()
        if self.on_change is not None:
            self.on_change(*now)


def run_sweep(
    jobs: Sequence[Job],
    *,
    workers: int = 2,
    cluster: Any = None,
    skip_done: bool = True,
    progress: bool = True,
    max_cost_usd: float | None = None,
    max_tokens_total: int | None = None,
) -> list[JobResult]:
    """Run jobs; writes `<out>/sweep.json`. `cluster`: None (threads here), "dask"/"local"
    (a Dask LocalCluster), a scheduler address, or a Dask cluster object.

    `max_cost_usd` / `max_tokens_total`: a cap on the whole sweep's new LLM spend (a cap in USD
    over a model without a price is refused before any job: ValueError naming it), kept in
    `<out>/spend.sqlite` (so it also counts earlier invocations of the same sweep); jobs reached
    by it end "stopped" (local threads only: kernels inherit the ledger through the environment)."""
    import os

    from mbb.llm.budget import COST_ENV, LEDGER_ENV, TOKENS_ENV

    if max_cost_usd is not None:  # a cap in USD over an unpriced model could never be reached
        from mbb.batch.build import llm_models
        from mbb.llm.budget import unpriced_cap

        for j in jobs:
            cond = load_params(j.params_path, j.overrides)
            why = unpriced_cap(
                f"--max-cost-usd {max_cost_usd:g} ({j.label})", llm_models(cond), cond.prices
            )
            if why is not None:
                raise ValueError(why)
    # the caps reach the kernels through the environment; it is given back as it was when the
    # sweep ends, so a later run in the same process (a notebook) is not capped by this sweep
    saved = {k: os.environ.get(k) for k in (LEDGER_ENV, COST_ENV, TOKENS_ENV)}
    if jobs and (max_cost_usd is not None or max_tokens_total is not None):
        os.environ[LEDGER_ENV] = str(Path(jobs[0].out_dir).parent / "spend.sqlite")
        os.environ[COST_ENV] = "" if max_cost_usd is None else str(max_cost_usd)
        os.environ[TOKENS_ENV] = "" if max_tokens_total is None else str(max_tokens_total)
    bar = None
    calls_bar: Any = None
    watcher = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc="sweep", unit="job")
        runs_total = sum(j.seed_to - j.seed_from + 1 for j in jobs)

        def moved(calls: int, runs: int) -> None:
            # LLM jobs take minutes: a second line counts their calls as the kernels log them
            nonlocal calls_bar
            if calls and calls_bar is None:
                calls_bar = tqdm(desc="LLM calls", unit="call", position=1, leave=True)
            if calls_bar is not None:
                calls_bar.update(calls - calls_bar.n)
                calls_bar.set_postfix_str(f"{runs}/{runs_total} runs ended")

        watcher = CallWatcher([j.out_dir for j in jobs], moved).start()

    def done(r: JobResult) -> None:
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(f"{r.condition}: {r.status}")

    try:
        if cluster is None:
            results = _run_local(jobs, workers, skip_done, done)
        else:
            address = None if cluster == "dask" else cluster
            results = _run_dask(jobs, workers, skip_done, address, done)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if watcher is not None:
            watcher.stop()
        for b in (calls_bar, bar):
            if b is not None:
                b.close()
    order = {j.label: i for i, j in enumerate(jobs)}
    results.sort(key=lambda r: order[r.condition])
    if jobs:
        root = Path(jobs[0].out_dir).parent
        manifest = {
            "jobs": [asdict(j) for j in jobs],
            "results": [asdict(r) for r in results],
        }
        (root / "sweep.json").write_text(json.dumps(manifest, indent=1))
    return results

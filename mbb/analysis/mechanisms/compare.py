"""Institutions vs centralized mechanisms on the same workloads: run, replay, measure, screen.

For every seed the condition is run as configured (the agents' institutions, when it is
negotiated), then its recorded demand is replayed under each centralized mechanism
(`mbb.analysis.mechanisms.replay`), so every mechanism faces exactly the same tasks, work,
deadlines, budgets and solver randomness. Outcomes, waits, execution shares and screens come
from the event tables of all those runs together.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from mbb.analysis.mechanisms.replay import replay
from mbb.analysis.mechanisms.screens import screens
from mbb.analysis.outcome import execution_by_worker, outcomes, waits
from mbb.core.tables import tables_from_lines, write_tables
from mbb.params import Condition, load_params
from mbb.protocol.arena import run_condition
from mbb.protocol.scheduling.centralized import CENTRALIZED

__all__ = ["MEASURES", "Comparison", "compare", "compare_conditions", "summary"]

# the columns of `mbb.analysis.outcome.outcomes` that compare allocations on one workload
MEASURES = (
    "deadline_miss",
    "completion",
    "progress",
    "mean_wait_s",
    "max_wait_s",
    "max_lateness_s",
    "gini_exec",
    "credits_per_run",
    "score",
)
RUN_KEYS = ["run_id", "base_run", "mechanism"]


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Per-run outcomes (one row per run and mechanism: `RUN_KEYS`, `worker_subruns` and
    `MEASURES`, defined in `mbb.analysis.outcome`), per-request waits, per-worker
    execution and per-run screens, each with a `condition` column; plus all event tables."""

    outcomes: pl.DataFrame
    waits: pl.DataFrame
    execution: pl.DataFrame
    screens: pl.DataFrame
    tables: dict[str, pl.DataFrame] = field(repr=False)
    seconds: float

    def write(self, out_dir: Path) -> list[Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = []
        for name in ("outcomes", "waits", "execution", "screens"):
            p = out_dir / f"{name}.parquet"
            getattr(self, name).write_parquet(p)
            paths.append(p)
        return paths


def compare(
    condition: Condition,
    *,
    seed: int | None = None,
    runs: int = 20,
    mechanisms: Sequence[str] = CENTRALIZED,
    out_dir: Path | None = None,
) -> Comparison:
    """Run seeds seed..seed+runs-1 and replay each under every mechanism in `mechanisms`."""
    unknown = sorted(set(mechanisms) - set(CENTRALIZED))
    if unknown:
        raise ValueError(f"unknown mechanism(s) {unknown}; known: {', '.join(CENTRALIZED)}")
    t0 = time.perf_counter()
    first = condition.seed if seed is None else seed
    by_kind: dict[str, list[str]] = defaultdict(list)
    replays = out_dir / "replays" if out_dir is not None else None
    for s in range(first, first + runs):
        original = run_condition(condition, s, out_dir)
        for k, lines in original.log.by_kind.items():
            by_kind[k].extend(lines)
        for m in mechanisms:
            r = replay(original.log.lines, m, replays)
            for k, lines in r.log.by_kind.items():
                by_kind[k].extend(lines)
    tables = tables_from_lines(by_kind)
    label = pl.lit(condition.name).alias("condition")
    out = (
        outcomes(tables, RUN_KEYS)
        .select(*RUN_KEYS, "worker_subruns", *MEASURES)
        .sort("base_run", "mechanism")
        .with_columns(label)
    )
    w = waits(tables).join(out.select("run_id", "mechanism", "base_run"), on="run_id")
    negotiated = out.filter(pl.col("mechanism") == "negotiated")["run_id"].to_list()
    result = Comparison(
        outcomes=out,
        waits=w.with_columns(label),
        execution=execution_by_worker(tables).with_columns(label),
        screens=screens(
            {k: v.filter(pl.col("run_id").is_in(negotiated)) for k, v in tables.items()}
        ).with_columns(label),
        tables=tables,
        seconds=time.perf_counter() - t0,
    )
    if out_dir is not None:
        write_tables(tables, out_dir / "tables")
        result.write(out_dir / "mechanisms")
    return result


def compare_conditions(
    params_paths: Sequence[str | Path],
    *,
    seed: int | None = None,
    runs: int = 20,
    overrides: Mapping[str, Any] | None = None,
    mechanisms: Sequence[str] = CENTRALIZED,
    out_root: Path | None = None,
) -> Comparison:
    """`compare` for several params files (each with `overrides` deep-merged), concatenated."""
    parts = []
    for p in params_paths:
        cond = load_params(p, overrides)
        out = out_root / cond.name if out_root is not None else None
        parts.append(compare(cond, seed=seed, runs=runs, mechanisms=mechanisms, out_dir=out))

    def cat(name: str) -> pl.DataFrame:
        return pl.concat([getattr(c, name) for c in parts], how="diagonal_relaxed")

    return Comparison(
        outcomes=cat("outcomes"),
        waits=cat("waits"),
        execution=cat("execution"),
        screens=cat("screens"),
        tables={
            k: pl.concat([c.tables[k] for c in parts], how="diagonal_relaxed")
            for k in parts[0].tables
        },
        seconds=sum(c.seconds for c in parts),
    )


def summary(out: pl.DataFrame, measures: Sequence[str] = MEASURES) -> pl.DataFrame:
    """Mean of each measure per condition and mechanism, institutions first, with run counts."""
    order = ["negotiated", *CENTRALIZED]
    return (
        out.group_by("condition", "mechanism")
        .agg(pl.len().alias("runs"), *[pl.col(m).mean().round(3) for m in measures])
        .with_columns(
            pl.col("mechanism")
            .replace_strict({m: i for i, m in enumerate(order)}, default=len(order))
            .alias("_o")
        )
        .sort("condition", "_o")
        .drop("_o")
    )

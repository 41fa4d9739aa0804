"""Institutions vs centralized mechanisms on the same workloads: replay, measure, screen.

Every recorded run (as it was played: the agents' institutions, when it was negotiated) is
replayed under each centralized mechanism (`mbb.analysis.mechanisms.replay`), so every
mechanism faces exactly the same tasks, work, deadlines, budgets and solver randomness.
Outcomes, waits, execution shares and screens come from the event tables of all those runs
together. The runs are read from their folders, never run again here (`mbb.batch` runs them).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from mbb.analysis.mechanisms.replay import ReplayError, replay
from mbb.analysis.mechanisms.screens import screens
from mbb.analysis.outcome import execution_by_worker, outcomes, waits
from mbb.analysis.runs import cell_of, excluded_note, find_run_dirs, run_status, selected_runs
from mbb.core.eventlog import kind_of, read_lines
from mbb.core.tables import tables_from_lines, write_tables
from mbb.protocol.scheduling.centralized import AUCTIONS, CENTRALIZED

__all__ = [
    "MEASURES",
    "Comparison",
    "compare",
    "compare_conditions",
    "configured_mechanism",
    "imposed",
    "no_institutions_note",
    "same_schedules",
    "summary",
]

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
    run_dirs: Iterable[str | Path],
    *,
    mechanisms: Sequence[str] = CENTRALIZED,
    out_dir: Path | None = None,
) -> Comparison:
    """Replay each recorded run under every mechanism in `mechanisms` but the one it was played
    under: a run of a condition that imposes a centralized mechanism (mech_fcfs) is that
    mechanism's run, one per seed (its replay under it was counted too: 10 runs of 5 seeds).

    run_dirs: run folders (each with its `events.jsonl`) of one condition;
    mechanisms: centralized mechanisms to replay under (default: all);
    out_dir: where the replays' events, the tables and the comparison go (None: nothing
    written)."""
    unknown = sorted(set(mechanisms) - set(CENTRALIZED))
    if unknown:
        raise ValueError(f"unknown mechanism(s) {unknown}; known: {', '.join(CENTRALIZED)}")
    t0 = time.perf_counter()
    by_kind: dict[str, list[str]] = defaultdict(list)
    replays = out_dir / "replays" if out_dir is not None else None
    names = set()
    dirs = [Path(d) for d in run_dirs]
    if not dirs:
        raise ValueError("compare needs at least one run folder")
    for d in dirs:
        lines = read_lines(d / "events.jsonl")
        names.add(cell_of(d.name))
        for line in lines:
            by_kind[kind_of(line)].append(line)
        played = configured_mechanism(lines)
        for m in mechanisms:
            if m == played:  # the run itself is that mechanism's run: a replay would count twice
                continue
            r = replay(lines, m, replays)
            for k, rlines in r.log.by_kind.items():
                by_kind[k].extend(rlines)
    if len(names) > 1:
        raise ValueError(f"compare takes runs of one condition (cell), got {sorted(names)}")
    condition = names.pop()
    tables = tables_from_lines(by_kind)
    label = pl.lit(condition).alias("condition")
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


def configured_mechanism(lines: Iterable[str]) -> str:
    """The mechanism a run was played under, from its `run_started` params: "negotiated" (the
    agents' institutions) or the centralized mechanism its condition imposes.

    lines: the run's event lines (`events.jsonl`)."""
    for line in lines:
        if kind_of(line) == "run_started":
            params = json.loads(line).get("params") or {}
            kind = (params.get("mechanism") or {}).get("kind", "negotiated")
            return str(kind)
    return "negotiated"


def compare_conditions(
    paths: Sequence[str | Path],
    *,
    conditions: Sequence[str] | None = None,
    include_invalid: bool = False,
    mechanisms: Sequence[str] = CENTRALIZED,
    out_root: Path | None = None,
) -> Comparison:
    """`compare` for every condition found under `paths` (a study, a sweep, condition or run
    folders: `mbb.analysis.runs`), one condition (cell) at a time, concatenated.

    conditions, include_invalid: which runs, as `mbb.analysis.runs.load_runs` takes them;
    mechanisms: as `compare`; out_root: replays and results go to `<out_root>/<condition>`
    (None: nothing written). Runs on real tasks cannot be replayed: their conditions are left
    out with a note."""
    by_cell: dict[str, list[Path]] = defaultdict(list)
    left_out = []  # as `load_runs`' `excluded`, said by the same note
    for run in selected_runs(find_run_dirs(paths), conditions):
        ok, why = run_status(run)
        if ok or (include_invalid and why is not None and why.startswith("invalid")):
            by_cell[cell_of(run.name)].append(run)
        else:
            left_out.append((run.name, cell_of(run.name), why or ""))
    excluded = pl.DataFrame(left_out, schema=["run_id", "cell", "reason"], orient="row")
    excluded_note({"excluded": excluded})
    if not by_cell:
        raise FileNotFoundError(f"no finished runs to replay under {', '.join(map(str, paths))}")
    parts = []
    for cell, runs in sorted(by_cell.items()):
        out = out_root / cell if out_root is not None else None
        try:
            parts.append(compare(runs, mechanisms=mechanisms, out_dir=out))
        except ReplayError as exc:
            print(f"left out {cell}: {exc}")
    if not parts:
        raise ReplayError("none of the conditions found can be replayed (modeled solvers only)")

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


def imposed(out: pl.DataFrame) -> dict[str, str]:
    """Condition -> the centralized mechanism it imposes, for every condition of `out` whose runs
    were not negotiated (mech_fcfs): it has no institutions to compare with, which its tables
    and charts say rather than leave the `negotiated` row blank.

    out: `Comparison.outcomes` (one row per run and mechanism)."""
    negotiated = set(out.filter(pl.col("mechanism") == "negotiated")["condition"])
    others = out.filter(~pl.col("condition").is_in(negotiated))
    if "run_id" in out.columns:  # the runs as played, not their replays
        others = others.filter(pl.col("run_id") == pl.col("base_run"))
    else:  # outcomes without run ids cannot tell the played mechanism from the replays
        return dict.fromkeys(sorted(set(others["condition"])), "a centralized mechanism")
    return {
        cond: ", ".join(sorted(set(g["mechanism"]))) for (cond,), g in others.group_by("condition")
    }


def no_institutions_note(mechanism: str) -> str:
    """What a condition that imposes `mechanism` shows in place of the institutions' values."""
    return f"none: the condition imposes {mechanism}, nothing was negotiated"


def summary(out: pl.DataFrame, measures: Sequence[str] = MEASURES) -> pl.DataFrame:
    """Mean of each measure per condition and mechanism, institutions first, with run counts
    and `played`: the runs as played (the agents' institutions, or the mechanism the condition
    imposes) or replays of their recorded demand. A condition that imposes a mechanism has a
    `negotiated` row saying so (0 runs, measures n/a), not a missing or blank one.

    out: `Comparison.outcomes`; measures: its columns to average."""
    order = ["negotiated", *CENTRALIZED]
    if "run_id" not in out.columns:  # which runs are replays is read from their ids
        out = out.with_columns(pl.lit(None, pl.String).alias("run_id"))
    rows = (
        out.group_by("condition", "mechanism")
        .agg(
            pl.len().alias("runs"),
            *[pl.col(m).mean().round(3) for m in measures],
            (pl.col("run_id") == pl.col("base_run")).any(ignore_nulls=False).alias("_played"),
        )
        .with_columns(
            pl.when(pl.col("_played").is_null())
            .then(pl.lit("n/a (no run ids to tell)"))
            .when(~pl.col("_played"))
            .then(pl.lit("replay of the recorded demand"))
            .when(pl.col("mechanism") == "negotiated")
            .then(pl.lit("as played: the agents' institutions"))
            .otherwise(pl.lit("as played: imposed by the condition"))
            .alias("played")
        )
        .drop("_played")
    )
    missing = [
        {"condition": c, "mechanism": "negotiated", "runs": 0, "played": no_institutions_note(m)}
        for c, m in imposed(out).items()
    ]
    if missing:
        rows = pl.concat([rows, pl.DataFrame(missing)], how="diagonal_relaxed")
    return (
        rows.with_columns(
            pl.col("mechanism")
            .replace_strict({m: i for i, m in enumerate(order)}, default=len(order))
            .alias("_o")
        )
        .sort("condition", "_o")
        .drop("_o")
        .select("condition", "mechanism", "played", "runs", *measures)
    )


def same_schedules(cmp: Comparison) -> pl.DataFrame:
    """Mechanisms that gave the same windows (who, when, how long) in every run of a condition,
    grouped ("edf = fcfs = first_price = second_price"), with the reason read from the
    workloads: their rows in every table and chart are then one result drawn several times,
    not results that agree by chance (a reviewer read EDF = FCFS on every row as a finding; on
    the scripted population the urgent W1 is also first in request order). One row per
    condition and group: `condition`, `mechanisms` ("a = b = c"), `runs` and `why`.

    cmp: a `compare` or `compare_conditions` result."""
    keys = cmp.outcomes.select("run_id", "base_run", "mechanism", "condition")
    schedule = (
        cmp.tables["windows"]
        .join(keys, on="run_id")
        .sort("run_id", "subrun", "start", "worker")
        .group_by("condition", "base_run", "mechanism")
        .agg(pl.concat_str("subrun", "worker", "start", "allocation", separator=":").alias("w"))
        .with_columns(pl.col("w").list.join(" ").alias("schedule"))
    )
    order = {m: i for i, m in enumerate(["negotiated", *CENTRALIZED])}
    rows = []
    for (condition,), part in schedule.sort("condition").group_by("condition", maintain_order=True):
        by_mech = {
            m: dict(zip(g["base_run"], g["schedule"], strict=True))
            for (m,), g in part.group_by("mechanism")
        }
        left = sorted(by_mech, key=lambda m: order.get(m, len(order)))
        while left:
            first, *rest = left
            group = [first, *(m for m in rest if by_mech[m] == by_mech[first])]
            left = [m for m in left if m not in group]
            if len(group) > 1:
                why = _why(cmp, condition, set(group))
                rows.append((condition, " = ".join(group), len(by_mech[first]), why))
    return pl.DataFrame(rows, schema=["condition", "mechanisms", "runs", "why"], orient="row")


def _played_runs(cmp: Comparison, condition: str) -> list[str]:
    """The condition's runs as they were played (negotiated or imposed), not their replays."""
    out = cmp.outcomes
    return out.filter(
        (pl.col("condition") == condition) & (pl.col("run_id") == pl.col("base_run"))
    )["run_id"].to_list()


def _why(cmp: Comparison, condition: str, group: set[str]) -> str:
    """Why mechanisms' schedules coincide on a condition's workloads, as far as the recorded
    bids, deadlines and request order say."""
    runs = _played_runs(cmp, condition)
    bid_mechs = group & {*AUCTIONS, "proportional_share"}
    reasons = []
    declared = cmp.tables["declarations"].filter(
        pl.col("run_id").is_in(runs) & (pl.col("bid").fill_null(0) > 0)
    )
    if bid_mechs and declared.is_empty():
        played = sorted(set(imposed(cmp.outcomes).get(condition, "").split(", ")) - {""})
        who = (
            f"the condition imposes {', '.join(played)}: nobody negotiated"
            if played
            else "the negotiators declared none"
        )
        said = f"no bid was declared in these runs ({who}), so every replayed bid is 0"
        if bid_mechs & set(AUCTIONS):
            said += ": the auctions have nothing to rank by and sell each window in request order"
        if "proportional_share" in bid_mechs:
            said += "; proportional share splits the window equally" + (
                ", as round robin does" if "round_robin" in group else ""
            )
        reasons.append(said)
    elif len(group) == len(bid_mechs & set(AUCTIONS)):
        reasons.append("both sell each window to the highest bid; only the price paid differs")
    if {"edf", "fcfs"} <= group:
        reasons.append(_edf_is_fcfs(cmp, runs))
    return "; ".join(reasons) or "their orders agree in every round of these workloads"


def _edf_is_fcfs(cmp: Comparison, runs: list[str]) -> str:
    """Why EDF and FCFS gave the same windows on `runs` (the runs as played)."""
    deadlines = cmp.tables["subrun_workers"].filter(pl.col("run_id").is_in(runs))
    if deadlines.is_empty():
        return "EDF and FCFS: their orders agree in every round of these workloads"
    if (
        deadlines.group_by("run_id", "subrun")
        .agg(pl.col("deadline_s").n_unique() == 1)["deadline_s"]
        .all()
    ):
        return "every worker has the same deadline: EDF's ties go by request order, as FCFS"
    earliest = deadlines.filter(
        pl.col("deadline_s") == pl.col("deadline_s").min().over("run_id", "subrun")
    )
    first = (
        cmp.tables["requests"]
        .filter(pl.col("run_id").is_in(runs))
        .sort("seq")
        .group_by("run_id", "subrun")
        .first()
        .select("run_id", "subrun", "worker")
    )
    led = first.join(earliest, on=["run_id", "subrun", "worker"], how="semi").height
    if led == first.height:
        who = ", ".join(sorted(set(earliest["worker"])))
        return (
            f"the earliest deadline ({who}) is also first in request order in every subrun: "
            "EDF and FCFS serve the queue alike (params/mech_mixed_deadlines.yaml makes them "
            "differ)"
        )
    return "EDF and FCFS: their orders agree in every round of these workloads"

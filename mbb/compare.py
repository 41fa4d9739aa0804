"""Put conditions side by side: run or load their tables and summarise them (the charts are in
`mbb.viz.compare`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import polars as pl
import polars.selectors as cs

from mbb.paths import user_path
from mbb.tables import TABLES, load_tables

__all__ = [
    "CONDITION_COLUMNS",
    "condition_table",
    "condition_tables",
    "ensure_conditions",
    "load_conditions",
    "model_table",
]


def load_conditions(dirs: Iterable[str | Path]) -> dict[str, pl.DataFrame]:
    """Tables of several condition folders, concatenated with a `condition` column.

    A folder is a condition's output (`<dir>/tables/*.parquet`); its name is the condition.
    """
    parts: dict[str, list[pl.DataFrame]] = {n: [] for n in TABLES}
    for d in dirs:
        folder = user_path(d)
        tdir = folder / "tables"
        if not tdir.is_dir():
            raise FileNotFoundError(f"{folder}: no tables/ folder (run the condition first)")
        tables = load_tables(tdir)
        for name in TABLES:
            parts[name].append(tables[name].with_columns(pl.lit(folder.name).alias("condition")))
    return {n: pl.concat(v, how="diagonal_relaxed") for n, v in parts.items() if v}


CONDITION_COLUMNS = (
    "runs",
    "completion",
    "deadline_miss",
    "progress",
    "score",
    "mean_bid",
    "rounds_per_subrun",
    "credits_per_run",
    "private_msgs_per_run",
)


def condition_table(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per condition: `CONDITION_COLUMNS` of `mbb.analysis.outcome.outcomes` (defined
    there), floats rounded to 3 decimals for display."""
    from mbb.analysis.outcome import outcomes

    out = outcomes(tables, "condition").select("condition", *CONDITION_COLUMNS)
    return out.with_columns(cs.float().round(3))


def model_table(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per condition x model (the study's model axis): runs, completion, deadline misses,
    progress and LLM cost per run (`mbb.analysis.outcome.outcomes`), with the tokens and cost
    of all runs. A run's model is that of its LLM calls ('scripted' for none; see
    `mbb.study.run_models`)."""
    from mbb.analysis.outcome import outcomes
    from mbb.study import run_models

    models = run_models(tables)
    keys = ["condition", "model"] if "condition" in tables["evaluations"].columns else ["model"]
    out = outcomes(tables, keys, attributes=[models]).select(
        *keys, "runs", "completion", "deadline_miss", "progress", "cost_per_run_usd"
    )
    calls = tables.get("llm_calls")
    if calls is not None and not calls.is_empty():
        c = calls.join(models, on="run_id", how="left", suffix="_run")
        spend = c.group_by([k if k != "model" else "model_run" for k in keys]).agg(
            (pl.col("prompt_tokens") + pl.col("completion_tokens")).sum().alias("tokens"),
            pl.col("cached_tokens").sum(),
            pl.col("cost_usd").sum(),
        )
        spend = spend.rename({"model_run": "model"})
        out = out.join(spend, on=keys, how="left")
    return out.sort(keys)


def condition_tables(
    params_paths: Iterable[str | Path],
    *,
    runs: int,
    out_root: str | Path,
    overrides: Mapping[str, Any] | None = None,
    seed: int | None = None,
) -> dict[str, pl.DataFrame]:
    """Run each params file (same overrides, deep-merged) into `<out_root>/<condition>` and
    return one tables dict with `runs` and `workers`, as the analyses expect.

    params_paths: the conditions' params files.
    runs: seeds per condition (seed..seed+runs-1).
    out_root: the folder that receives one folder per condition.
    overrides: params deep-merged into every condition (e.g. `{"subruns": 2}`).
    seed: the first seed (default: each condition's own).

    Runs are always redone rather than read back, so a notebook's numbers never come from a
    stale folder left by another parameter set (a scripted run takes milliseconds).
    """
    from mbb.analysis import with_run_info
    from mbb.params import load_params
    from mbb.runner import run_many
    from mbb.tables import concat_tables

    parts = []
    for p in params_paths:
        cond = load_params(p, overrides)
        out = user_path(out_root) / cond.name
        b = run_many(cond, seed=seed, runs=runs, out_dir=out).check()
        parts.append(with_run_info(b.tables, by_kind=b.by_kind))
    if not parts:
        raise ValueError("condition_tables needs at least one params path")
    t = concat_tables(parts)
    t["runs"] = pl.concat([p["runs"] for p in parts])
    t["workers"] = pl.concat([p["workers"] for p in parts])
    return t


def ensure_conditions(
    params_paths: Iterable[str | Path], *, runs: int, out_root: str | Path = "outputs"
) -> list[Path]:
    """Condition folders for these params files, running any whose tables are missing."""
    from mbb.params import load_params
    from mbb.runner import run_many

    dirs = []
    for p in params_paths:
        cond = load_params(p)
        folder = user_path(out_root) / cond.name
        if not (folder / "tables" / "evaluations.parquet").is_file():
            run_many(cond, runs=runs, out_dir=folder).check()
        dirs.append(folder)
    return dirs

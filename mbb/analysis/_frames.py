"""Shared frames: run and worker information, and one table of every utterance.

`mbb.core.tables` has no table for `run_started`, but several measures need each worker's persona or
model and each run's condition, memory switch and bid regime, and the institutions analysis the
taxonomy categories the run's rules impose (`imposed`: `mbb.protocol.explain.imposed` of the
recorded params). `run_info` reads them from the `run_started` lines (a batch's `by_kind`, or
the first line of each run's events.jsonl) and `with_run_info` adds them to a tables dict as
`runs` and `workers`.
"""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import polars as pl

from mbb.core import safejson
from mbb.core.eventlog import MAX_LINE_CHARS

__all__ = [
    "RUN_SCHEMA",
    "WORKER_SCHEMA",
    "measured_runs",
    "run_info",
    "run_info_from_dirs",
    "utterances",
    "with_run_info",
]

WORKER_SCHEMA = {
    "run_id": pl.String,
    "worker": pl.String,
    "index": pl.Int64,
    "persona": pl.String,
    "negotiator": pl.String,
    "model": pl.String,
    "budget": pl.Int64,
    "deadline_s": pl.Float64,
    "label": pl.String,
}
RUN_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "run_id": pl.String,
    "condition": pl.String,
    "seed": pl.Int64,
    "memory": pl.Boolean,
    "bids": pl.String,
    "subruns": pl.Int64,
    "imposed": pl.List(pl.String),
}

_RUN_STARTED = pl.Schema(
    {  # instances, not classes, so that the mapping has one value type (DataType)
        "run_id": pl.String(),
        "condition": pl.String(),
        "seed": pl.Int64(),
        "params": pl.Struct(
            {
                "subruns": pl.Int64,
                "memory": pl.Struct({"enabled": pl.Boolean, "reports": pl.Boolean}),
                "negotiation": pl.Struct(
                    {
                        "conversation": pl.Boolean,
                        "max_turns": pl.Int64,
                        "bids": pl.String,
                        "withdrawal": pl.String,
                        "ballot_reasoning": pl.String,
                    }
                ),
                "mechanism": pl.Struct(
                    {
                        "kind": pl.String,
                        "aggregation": pl.String,
                        "payment": pl.String,
                        "allocation": pl.String,
                    }
                ),
                "time": pl.Struct({"model": pl.String}),
            }
        ),
        "workers": pl.List(
            pl.Struct(
                {
                    "id": pl.String,
                    "index": pl.Int64,
                    "persona": pl.String,
                    "negotiator": pl.String,
                    "model": pl.String,
                    "budget": pl.Int64,
                    "deadline_s": pl.Float64,
                }
            )
        ),
    }
)


def run_info(run_started_lines: Sequence[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(runs, workers) from `run_started` event lines.

    `label` is what the paper calls the model: the LLM's model name for LLM negotiators, the
    persona name for scripted ones.
    """
    if not run_started_lines:
        return pl.DataFrame(schema=RUN_SCHEMA), pl.DataFrame(schema=WORKER_SCHEMA)
    raw = pl.read_ndjson(io.BytesIO("\n".join(run_started_lines).encode()), schema=_RUN_STARTED)
    imposed = [_imposed(p) for p in raw["params"].to_list()]
    runs = raw.select(
        "run_id",
        "condition",
        "seed",
        pl.col("params").struct.field("memory").struct.field("enabled").alias("memory"),
        pl.col("params").struct.field("negotiation").struct.field("bids").alias("bids"),
        pl.col("params").struct.field("subruns").alias("subruns"),
    ).with_columns(pl.Series("imposed", imposed, dtype=pl.List(pl.String)))
    workers = (
        raw.select("run_id", "workers")
        .explode("workers")
        .unnest("workers")
        .rename({"id": "worker"})
        .with_columns(
            pl.when(pl.col("negotiator") == "llm")
            .then(pl.col("model").fill_null("llm"))
            .otherwise(pl.col("persona"))
            .alias("label")
        )
        .select(list(WORKER_SCHEMA))
    )
    return runs, workers


def _present(d: Any) -> Any:
    """A recorded params struct without its missing (null) fields: the schema's defaults."""
    if isinstance(d, dict):
        return {k: _present(v) for k, v in d.items() if v is not None}
    return d


@functools.cache
def _imposed_of(params_json: str) -> tuple[str, ...]:
    from mbb.params import Condition
    from mbb.protocol.explain import imposed

    return tuple(sorted(imposed(Condition.model_validate(json.loads(params_json)))))


def _imposed(params: dict[str, Any] | None) -> list[str]:
    """The categories the rules of a run's recorded params impose."""
    keep = _present(params or {})
    return list(_imposed_of(json.dumps(keep, sort_keys=True)))


def run_info_from_dirs(run_dirs: Iterable[Path]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Read only the first line (run_started) of each run's events.jsonl."""
    lines = []
    for d in run_dirs:
        with (Path(d) / "events.jsonl").open(encoding="utf-8") as fh:
            first = fh.readline(MAX_LINE_CHARS + 1)  # a longer one is no event
        event = safejson.loads(first) if first.strip() else None  # ValueError when corrupt
        if isinstance(event, dict) and event.get("kind") == "run_started":
            lines.append(first.rstrip("\n"))
    return run_info(lines)


def with_run_info(
    tables: Mapping[str, pl.DataFrame],
    *,
    by_kind: Mapping[str, Sequence[str]] | None = None,
    run_dirs: Iterable[Path] | None = None,
) -> dict[str, pl.DataFrame]:
    """A copy of `tables` with `runs` and `workers` added (from a batch's lines or run dirs)."""
    if by_kind is not None:
        runs, workers = run_info(by_kind.get("run_started", ()))
    elif run_dirs is not None:
        runs, workers = run_info_from_dirs(run_dirs)
    else:
        raise ValueError("with_run_info needs by_kind= (BatchResult.by_kind) or run_dirs=")
    return {**tables, "runs": runs, "workers": workers}


def require(tables: Mapping[str, pl.DataFrame], name: str) -> pl.DataFrame:
    if name not in tables:
        raise KeyError(
            f"this analysis needs the {name!r} table; add it with "
            "mbb.analysis.with_run_info(tables, by_kind=batch.by_kind) or run_dirs=..."
        )
    return tables[name]


_UTTERANCE_COLS = ["run_id", "seq", "subrun", "round", "worker", "source", "turn", "to", "text"]


def utterances(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Every piece of negotiation text: declaration notes, messages, ballot reasoning.

    One row per utterance keyed by (run_id, seq); `labels` is the scripted ground truth (empty
    for LLM workers) and is never read by the classifiers.
    """
    d = tables["declarations"].select(
        "run_id",
        "seq",
        "subrun",
        "round",
        "worker",
        pl.lit("declaration").alias("source"),
        pl.col("turn").fill_null(0),
        pl.lit(None, pl.String).alias("to"),
        pl.col("note").alias("text"),
        "labels",
    )
    m = tables["messages"].select(
        "run_id",
        "seq",
        "subrun",
        "round",
        "worker",
        pl.lit("message").alias("source"),
        "turn",
        "to",
        "text",
        "labels",
    )
    b = tables["ballots"].select(
        "run_id",
        "seq",
        "subrun",
        "round",
        "worker",
        pl.lit("ballot").alias("source"),
        pl.lit(99, pl.Int64).alias("turn"),
        pl.lit(None, pl.String).alias("to"),
        pl.col("reasoning").alias("text"),
        "labels",
    )
    return (
        pl.concat([d, m, b], how="vertical_relaxed")
        .with_columns(pl.col("text").fill_null(""), pl.col("labels").fill_null([]))
        .sort("run_id", "seq")
    )


# what each kind of measure is read from: a run that holds none of it (no negotiation text under
# a centralized mechanism, no message with conversation off, no bid declared) has no value of
# the measure, n/a, never the 0 a count over nothing gives
_MEASURED_FROM: dict[str, tuple[str, ...]] = {
    "text": ("declarations", "messages", "ballots"),
    "conversation": ("messages",),
    "bids": ("declarations",),
}


def measured_runs(
    tables: Mapping[str, pl.DataFrame], source: Literal["text", "conversation", "bids"]
) -> pl.Series:
    """The run ids that hold what a measure of `source` is read from: "text" (any declaration
    note, message or ballot: the workers negotiated), "conversation" (any message) or "bids"
    (any declaration). mbb's one rule for a measure a run could not have: outside these runs it
    is n/a (null), never 0 (a rule-making share of 0 % read as measured for a centralized
    mechanism, a reviewer's find).

    tables: the run tables of `mbb.core.tables`; source: the kind of measure."""
    parts = [tables[name].select("run_id") for name in _MEASURED_FROM[source] if name in tables]
    if not parts:
        return pl.Series("run_id", [], pl.String)
    return pl.concat(parts).get_column("run_id").unique()


def condition_of(df: pl.DataFrame, tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Add `condition`: from the runs table when present, else parsed from the run id."""
    if "runs" in tables:
        return df.join(tables["runs"].select("run_id", "condition"), on="run_id", how="left")
    return df.with_columns(pl.col("run_id").str.replace(r"-seed\d+$", "").alias("condition"))


def seed_of(run_ids: pl.Expr) -> pl.Expr:
    """The seed in a run id ("base-seed0003" -> 3); null when the id carries none."""
    return run_ids.str.extract(r"seed(\d+)", 1).cast(pl.Int64)


def run_seeds(
    tables: Mapping[str, pl.DataFrame], run_ids: pl.DataFrame | None = None
) -> pl.DataFrame:
    """run_id, condition and seed of each run: from the runs table (`with_run_info`) when
    present, else parsed from the run id. run_ids: the runs to describe (a `run_id` column;
    default: the runs of the rounds table)."""
    ids = run_ids if run_ids is not None else tables["rounds"].select("run_id").unique()
    if "runs" in tables:
        runs = tables["runs"].select("run_id", "condition", "seed")
        return ids.join(runs, on="run_id", how="left")
    return condition_of(ids, tables).with_columns(seed_of(pl.col("run_id")).alias("seed"))


def labels_of(df: pl.DataFrame, tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Add `model` (the paper's model column): persona or LLM name, else 'scripted'."""
    if "workers" in tables:
        w = tables["workers"].select("run_id", "worker", pl.col("label").alias("model"))
        return df.join(w, on=["run_id", "worker"], how="left").with_columns(
            pl.col("model").fill_null("scripted")
        )
    return df.with_columns(pl.lit("scripted").alias("model"))


By = Literal["condition", "run_id"]
"""What a row of a measure is about: a condition (its runs pooled) or a run (see
`mbb.analysis`'s docstring)."""


def by_keys(
    by: str, measure: str, pooled: Sequence[str], per_run: Sequence[str] = ("run_id",)
) -> list[str]:
    """The keys a measure groups on for `by`: `pooled` for "condition", `per_run` for "run_id".

    by: the `by=` argument; measure: the measure's name, for the error; pooled, per_run: the
    measure's grouping keys in each form."""
    if by == "condition":
        return list(pooled)
    if by == "run_id":
        return list(per_run)
    raise ValueError(
        f"{measure}: by={by!r}; by is 'condition' (the condition's runs pooled, the paper's "
        "table) or 'run_id' (one row per run with its condition and seed, for a CI over seeds)"
    )

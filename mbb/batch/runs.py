"""What a run is called, where it may be written, and the model axis of sweeps.

- `model_label(condition)`: the model config name(s) of a condition's LLM workers (None for a
  scripted condition). Run ids and folders include it (`<condition>-<model>-seedNNNN`), so runs
  of the same condition with different models never share a folder; scripted runs keep
  `<condition>-seedNNNN`.
- `with_model(params overrides, name, condition)`: `mbb run --model` / `mbb sweep --models`; an
  unknown name is refused with the configured ones listed.
- `check_not_foreign(run_dir, condition)`: an existing run folder is only re-written by a run of
  the same condition with the same parameters; anything else is refused before the run starts.
- `spend_table_html`: the report's "LLM spend by model" table.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mbb.agents.backends import NEGOTIATORS, SOLVERS
from mbb.core import safejson
from mbb.core.eventlog import MAX_LINE_CHARS
from mbb.core.nested import comparable_params

__all__ = [
    "ForeignRunError",
    "check_not_foreign",
    "model_label",
    "run_id_for",
    "run_id_of",
    "spend_table_html",
    "with_model",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")


class ForeignRunError(FileExistsError):
    """A run folder holds a run of another condition, model or parameters."""


def run_id_for(condition: str, seed: int, model: str | None = None) -> str:
    """`<condition>-seedNNNN`; with LLM workers `<condition>-<model>-seedNNNN`."""
    if model:
        return f"{condition}-{model}-seed{seed:04d}"
    return f"{condition}-seed{seed:04d}"


def run_id_of(condition: Any, seed: int) -> str:
    """The run id of one seed of `condition` (its LLM workers' models in it, if any)."""
    return run_id_for(condition.name, seed, model_label(condition))


def model_label(condition: Any) -> str | None:
    """'a' or 'a+b' (sorted config names of the LLM workers' models); None when none is LLM."""
    names = sorted(
        {
            s.model
            for s in condition.worker_specs()
            if s.model is not None
            and (NEGOTIATORS[s.negotiator].needs_model or SOLVERS[s.solver].needs_model)
        }
    )
    if not names:
        return None
    return _UNSAFE.sub("_", "+".join(names))


def with_model(condition: Any, name: str) -> dict[str, Any]:
    """The override selecting model config `name` for the condition's LLM workers."""
    if model_label(condition) is None or not condition.models:
        raise ValueError(
            f"condition {condition.name!r} has no LLM workers, so a model would change nothing; "
            "to run mbb's conditions on models, name them in a study file (mbb study, e.g. "
            "studies/scarce.yaml), which gives them LLM workers and the models' endpoints"
        )
    if name not in condition.models:
        known = ", ".join(sorted(condition.models))
        raise ValueError(
            f"unknown model {name!r} for condition {condition.name!r}; configured models: {known}"
        )
    return {"workers": {"model": name}}


def check_not_foreign(run_dir: Path, condition: Any) -> None:
    """Raise ForeignRunError if `run_dir` holds a run whose parameters differ from `condition`'s."""
    path = run_dir / "events.jsonl"
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as fh:
        first = fh.readline(MAX_LINE_CHARS + 1)  # a longer one is no event
    try:
        started = safejson.loads(first)
    except ValueError:
        return  # not even one complete event: nothing worth keeping
    if not isinstance(started, dict):
        return  # not an event either
    recorded = started.get("params") if started.get("kind") == "run_started" else None
    if not isinstance(recorded, dict):
        return  # no params recorded: not a run of any condition
    current = condition.model_dump(mode="json")
    if comparable_params(recorded) == comparable_params(current):
        return
    a, b = comparable_params(recorded), comparable_params(current)
    differing = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    raise ForeignRunError(
        f"{run_dir} holds a run of condition {recorded.get('name')!r} with other parameters "
        f"(differing: {', '.join(differing)}); it is not overwritten. Write to another folder "
        "(--out), give the condition another name, or delete that run first"
    )


def spend_table_html(calls: Any, note: str = "") -> str:
    """The report's "LLM spend by model" table ('' without LLM calls): one row per model with
    its conditions, runs, tokens, cached share, cost and cost per run. calls: the `llm_calls`
    table with a `condition` column (`mbb.analysis.runs.load_runs`); note: a line under the
    heading (which runs it covers). The token counts are those the endpoints reported; a model
    with calls that reported none (or failed) says how many, and its cost is unknown. A model
    whose endpoint named another model in its answers (a dated snapshot, a router's choice:
    `served_model`) says which, under its name."""
    import html

    import polars as pl

    from mbb.analysis.tokens import (
        STUB_CALLS,
        cost_text,
        known_cost,
        tokens_text,
        total_cost,
        without_usage,
    )

    if calls is None or calls.is_empty():
        return ""
    if "served_model" not in calls.columns:  # tables written before mbb recorded it
        calls = calls.with_columns(pl.lit(None, pl.String).alias("served_model"))
    t = (
        calls.group_by("model")
        .agg(
            pl.col("condition").unique().sort().str.join(", ").alias("conditions"),
            pl.col("served_model").drop_nulls().unique().sort().alias("served"),
            pl.col("run_id").n_unique().alias("runs"),
            pl.len().alias("calls"),
            pl.col("prompt_tokens").sum(),
            pl.col("cached_tokens").sum(),
            pl.col("completion_tokens").sum(),
            total_cost(),
            known_cost(),
            without_usage(),
        )
        .with_columns(
            (pl.col("cost_usd") / pl.col("runs")).alias("cost_per_run"),
            (pl.col("known_cost_usd") / pl.col("runs")).alias("known_per_run"),
        )
        .sort("model")
    )

    def model_cell(r: dict[str, Any]) -> str:
        served = r["served"]
        if not served:
            return html.escape(r["model"])
        names = ", ".join(served[:3]) + (f" and {len(served) - 3} more" if len(served) > 3 else "")
        return f"{html.escape(r['model'])}<div class=ci>answered as {html.escape(names)}</div>"

    def cached(r: dict[str, Any]) -> str:  # of the prompt tokens reported; none: unknown
        if not r["prompt_tokens"]:
            return "unknown" if r["calls_without_usage"] else "–"
        return f"{r['cached_tokens'] / r['prompt_tokens']:.1%}"

    def cost(r: dict[str, Any], value: str, known: str) -> str:
        if r["model"].startswith("stub-"):  # answered on loopback: nothing billed, no "$0"
            return f"n/a ({STUB_CALLS})"
        return cost_text(r[value], r["calls_without_usage"], r[known])

    rows = "".join(
        "<tr>"
        f"<td class=l>{model_cell(r)}</td><td class=l>{html.escape(r['conditions'])}</td>"
        f"<td>{r['runs']}</td><td>{r['calls']}</td>"
        f"<td>{tokens_text(r['prompt_tokens'], r['calls_without_usage'])}</td>"
        f"<td>{cached(r)}</td>"
        f"<td>{tokens_text(r['completion_tokens'], r['calls_without_usage'])}</td>"
        f"<td>{cost(r, 'cost_usd', 'known_cost_usd')}</td>"
        f"<td>{cost(r, 'cost_per_run', 'known_per_run')}</td></tr>"
        for r in t.iter_rows(named=True)
    )
    return (
        "<h2>LLM spend by model</h2>"
        + (f"<p>{html.escape(note)}</p>" if note else "")
        + "<table class=by-model><tr><th class=l>model</th>"
        "<th class=l>conditions</th><th>runs</th><th>calls</th><th>prompt tokens</th>"
        "<th>cached</th><th>completion tokens</th><th>cost</th><th>cost per run</th></tr>"
        + rows
        + "</table>"
    )

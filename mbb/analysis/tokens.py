"""Token audit: who spent how many tokens on what (worker × role × phase × subrun × model),
at what cost, and what it bought (tokens per credit won, per test passed).

LLM calls are `llm_call` events (fields worker, role, phase, model, prompt_tokens,
completion_tokens, reasoning_tokens, cached_tokens, cost_usd, cache_hit); pass their table as
`tables["llm_calls"]`. Scripted runs make no API calls: their negotiation text is counted with
`approx_tokens`, a regex tokenizer (each run of word characters, and each other
non-space character, is one token) — roughly what a BPE tokenizer gives for short English, and
labelled `approximate` in every row. Classifier calls (role "classifier") are reported apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from mbb.analysis._frames import condition_of, labels_of, utterances

__all__ = [
    "LLM_CALL_SCHEMA",
    "TOKEN_RX",
    "approx_tokens",
    "classifier_spend",
    "cost_by_model",
    "run_models",
    "spend_by_model",
    "token_audit",
    "token_efficiency",
    "total_cost",
]

TOKEN_RX = r"\w+|[^\w\s]"
LLM_CALL_SCHEMA = {
    "run_id": pl.String,
    "subrun": pl.Int64,
    "round": pl.Int64,
    "worker": pl.String,
    "role": pl.String,
    "phase": pl.String,
    "model": pl.String,
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "reasoning_tokens": pl.Int64,
    "cached_tokens": pl.Int64,
    "cost_usd": pl.Float64,
    "cache_hit": pl.Boolean,
}
_PHASE = {"declaration": "declaration", "message": "conversation", "ballot": "ballot"}
KEYS = ["condition", "run_id", "worker", "model", "role", "phase", "subrun"]


def total_cost(col: str = "cost_usd") -> pl.Expr:
    """The sum of a cost column, null (unknown) when any of its values is: a call of a model
    without a price costs an unknown amount, so a total over it is unknown too, never a
    partial sum or 0."""
    return pl.when(pl.col(col).is_null().any()).then(None).otherwise(pl.col(col).sum()).alias(col)


def known_cost(col: str = "cost_usd") -> pl.Expr:
    """The summed cost of the calls that reported usage (`known_cost_usd`): what is known to
    have been spent when other calls' cost is unknown, a lower bound; null when one of them
    has no price. An outage of two calls no longer hides the cost of the 616 answered."""
    cost = pl.col(col).filter(pl.col("prompt_tokens").is_not_null())
    return pl.when(cost.is_null().any()).then(None).otherwise(cost.sum()).alias("known_cost_usd")


def without_usage() -> pl.Expr:
    """The number of calls whose token counts are unknown (their `prompt_tokens` is null): the
    endpoint reported none, or the call failed (an endpoint may bill an answer mbb refused).
    The token sums beside it leave those calls out, and their cost is unknown."""
    return pl.col("prompt_tokens").is_null().sum().cast(pl.Int64).alias("calls_without_usage")


def _partly_unknown(known: str | None, calls_without_usage: int) -> str:
    """The one wording of a sum some of whose calls reported no usage: "unknown (N calls
    without usage)", after "≥ X + " when the others are known to sum to X (a lower bound)."""
    unknown = f"unknown ({calls_without_usage} calls without usage)"
    return f"≥ {known} + {unknown}" if known else unknown


NO_API_CALLS = "scripted: no API calls"
"""Why a cost is n/a for scripted work (no model was called): the one wording of every table."""
STUB_CALLS = "stub: no API calls"
"""Why a cost is n/a for a stub model (`mbb study --stub`: answered on loopback, never billed)."""


def cost_text(value: float | None, calls_without_usage: int = 0, known: float | None = None) -> str:
    """A cost as the tables show it: "unknown (N calls without usage)" when some calls have
    no token counts (none reported, or the call failed), after "≥ $X + " when the others are
    known to have cost X; "unpriced" for a model without a price, else dollars; never $0 for
    a cost nobody knows. One wording for the report, the viewer and the spend tables.

    value: the summed cost (`total_cost`), None when unknown.
    calls_without_usage: how many of the calls it sums reported no token counts.
    known: the cost of the others (`known_cost`), a lower bound; None or 0: nothing known."""
    if calls_without_usage:
        return _partly_unknown(f"${known:.4f}" if known else None, calls_without_usage)
    return "unpriced" if value is None else f"${value:.4f}"


def tokens_text(tokens: int | None, calls_without_usage: int = 0) -> str:
    """A token count as the tables show it, in `cost_text`'s wording: "≥ N + unknown (M calls
    without usage)" when M calls reported no counts (N: the others' sum), "unknown (...)"
    when none did; never a sum that passes for the whole.

    tokens: the sum over the calls that reported usage (None or 0 with no such call).
    calls_without_usage: how many calls reported no token counts."""
    if calls_without_usage:
        return _partly_unknown(f"{tokens:,}" if tokens else None, calls_without_usage)
    return "unknown" if tokens is None else f"{tokens:,}"


def approx_tokens(text: pl.Expr) -> pl.Expr:
    """Approximate token count of a text column (documented regex tokenizer)."""
    return text.str.count_matches(TOKEN_RX)


def _approximate(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    u = utterances(tables).with_columns(
        pl.lit("negotiator").alias("role"),
        pl.col("source").replace_strict(_PHASE).alias("phase"),
        approx_tokens(pl.col("text")).alias("completion_tokens"),
    )
    s = tables["scratch"].select(
        "run_id",
        "subrun",
        "worker",
        pl.lit("negotiator").alias("role"),
        pl.lit("report").alias("phase"),
        approx_tokens(pl.col("text")).alias("completion_tokens"),
    )
    a = pl.concat([u.select(s.columns), s])
    a = labels_of(condition_of(a, tables), tables)
    return (
        a.group_by(KEYS)
        .agg(
            pl.len().alias("calls"),
            pl.lit(0, pl.Int64).alias("prompt_tokens"),
            pl.col("completion_tokens").sum().cast(pl.Int64),
            pl.lit(0, pl.Int64).alias("reasoning_tokens"),
            pl.lit(0, pl.Int64).alias("cached_tokens"),
            pl.lit(None, pl.Float64).alias("cost_usd"),
            pl.lit(0, pl.Int64).alias("cache_hits"),
            pl.lit(0, pl.Int64).alias("calls_without_usage"),
        )
        .with_columns(pl.lit(True).alias("approximate"))
    )


def _llm(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    c = tables["llm_calls"]
    c = condition_of(c, tables)
    return (
        c.with_columns(pl.col("model").fill_null("unknown"))
        .group_by(KEYS)
        .agg(
            pl.len().alias("calls"),
            pl.col("prompt_tokens").fill_null(0).sum(),
            pl.col("completion_tokens").fill_null(0).sum(),
            pl.col("reasoning_tokens").fill_null(0).sum(),
            pl.col("cached_tokens").fill_null(0).sum(),
            total_cost(),
            pl.col("cache_hit").fill_null(False).sum().cast(pl.Int64).alias("cache_hits"),
            without_usage(),
        )
        .with_columns(pl.lit(False).alias("approximate"))
    )


def token_audit(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Tokens and cost per (condition, run, worker, model, role, phase, subrun).

    Exact (`approximate` false) from `llm_calls` when that table exists and is not empty;
    otherwise approximate counts of the scripted text. `total_tokens` = prompt + completion
    + reasoning, over the calls that reported usage: `calls_without_usage` counts the others
    (their cost unknown, so `cost_usd` is null).

    `tables`: the event tables of one or more runs.
    """
    calls = tables.get("llm_calls")
    df = _llm(tables) if calls is not None and calls.height else _approximate(tables)
    return df.with_columns(
        (pl.col("prompt_tokens") + pl.col("completion_tokens") + pl.col("reasoning_tokens")).alias(
            "total_tokens"
        ),
        (pl.col("role") == "classifier").alias("classifier"),
    ).sort(KEYS)


def token_efficiency(
    tables: Mapping[str, pl.DataFrame],
    audit: pl.DataFrame,
    by: Sequence[str] = ("condition", "model"),
) -> pl.DataFrame:
    """Per condition and model (negotiation and solving only; classifier spend excluded):
    tokens per window won, per credit spent on won windows, and per hidden test passed. The
    model is the worker's label (a persona, or the study's model slot), as in every table of
    outcomes, not the name the endpoint was sent. `total_tokens` (and the ratios) count the
    calls whose endpoint reported usage; `calls_without_usage` says how many are not in it
    (failed, or no counts reported: their tokens are unknown), so a partial sum is never shown
    as the whole.

    `tables`: the event tables (payments and evaluations are read); `audit`: `token_audit`
    of them; `by`: the grouping, any of condition, run_id, model (default: per condition and
    model; add run_id for one value per seed, as a CI over seeds needs). `runs`: how many runs
    each row pools (its ratios are ratios of sums over them, not means over seeds)."""
    keys = list(by)
    # the worker's label (persona, or the study's model slot) as payments and evaluations carry
    # it: the audit's endpoint model name ("gpt-5.2" for slot "frontier_gpt") never matched, and
    # an LLM study's tokens per window, credit and test were all n/a (a newcomer's find)
    mine = audit.filter(~pl.col("classifier"))
    if "workers" in tables and "worker" in mine.columns:
        mine = labels_of(mine.drop("model"), tables)
    spent = mine.group_by(keys).agg(
        pl.col("run_id").n_unique().alias("runs"),  # the runs each ratio pools
        pl.col("total_tokens").sum(),
        pl.col("calls_without_usage").sum(),
        total_cost().alias("cost_usd"),
        pl.col("approximate").all(),
    )
    won = (
        labels_of(condition_of(tables["payments"], tables), tables)
        .group_by(keys)
        .agg(pl.len().alias("windows_paid"), pl.col("amount").sum().alias("credits_paid"))
    )
    ev = (
        labels_of(condition_of(tables["evaluations"], tables), tables)
        .group_by(keys)
        .agg(pl.col("passed").sum().alias("tests_passed"))
    )
    out = spent.join(won, on=keys, how="left").join(ev, on=keys, how="left")
    per = lambda c: pl.when(pl.col(c) > 0).then(pl.col("total_tokens") / pl.col(c))  # noqa: E731
    return out.with_columns(
        per("windows_paid").alias("tokens_per_window_won"),
        per("credits_paid").alias("tokens_per_credit_won"),
        per("tests_passed").alias("tokens_per_test_passed"),
    ).sort(keys)


def classifier_spend(audit: pl.DataFrame) -> pl.DataFrame:
    """Classifier calls only, by condition and model."""
    return (
        audit.filter(pl.col("classifier"))
        .group_by("condition", "model")
        .agg(
            pl.col("calls").sum(),
            pl.col("total_tokens").sum(),
            total_cost(),
            pl.col("cache_hits").sum(),
        )
        .sort("condition", "model")
    )


def cost_by_model(audit: pl.DataFrame, by: Sequence[str] = ("condition", "model")) -> pl.DataFrame:
    """Per condition and model: runs, calls, tokens and cost in USD (total and per run).

    `cost_usd` is null where no price is known (scripted text, or a model without `prices:`:
    unknown, never 0);
    `cost_unknown_because` says why, in words;
    `approximate` is true for counts of scripted text rather than an endpoint's usage. Scripted
    workers have no model: their rows are one `model` "scripted", never their personas' names
    (the audit's `model` column keeps the persona for the prevalence tables).
    `audit`: `token_audit`; `by`: the grouping, any columns of the audit (add run_id for one
    value per seed, as a CI over seeds needs)."""
    keys = list(by)
    if "model" in keys:
        audit = audit.with_columns(
            pl.when(pl.col("approximate"))
            .then(pl.lit("scripted"))
            .otherwise(pl.col("model"))
            .alias("model")
        )
    return (
        audit.group_by(keys)
        .agg(
            pl.col("run_id").n_unique().alias("runs"),
            pl.col("calls").sum(),
            pl.col("prompt_tokens").sum(),
            pl.col("completion_tokens").sum(),
            pl.col("total_tokens").sum(),
            total_cost().alias("cost_usd"),
            pl.col("calls_without_usage").sum(),
            pl.col("approximate").all(),
        )
        .with_columns(
            (pl.col("cost_usd") / pl.col("runs")).alias("cost_per_run_usd"),
            # why a cost is unknown, in words a table can show beside it
            pl.when(pl.col("cost_usd").is_not_null())
            .then(None)
            .when(pl.col("approximate"))
            .then(pl.lit(NO_API_CALLS))
            .when(pl.col("calls_without_usage") > 0)
            .then(pl.format("{} calls without usage", pl.col("calls_without_usage")))
            .otherwise(pl.lit("no price for this model"))
            .alias("cost_unknown_because"),
        )
        .sort(keys)
    )


def run_models(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per run: run_id, model ('+'-joined model names of its LLM calls; 'scripted')."""
    runs = tables["evaluations"].select("run_id").unique()
    calls = tables.get("llm_calls")
    if calls is None or calls.is_empty():
        return runs.with_columns(pl.lit("scripted").alias("model"))
    models = calls.group_by("run_id").agg(
        pl.col("model").unique().sort().str.join("+").alias("model")
    )
    return (
        runs.join(models, on="run_id", how="left")
        .with_columns(pl.col("model").fill_null("scripted"))
        .sort("run_id")
    )


def spend_by_model(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Per model: runs, calls, prompt / cached / completion tokens, cost and cost per run."""
    calls = tables.get("llm_calls")
    if calls is None or calls.is_empty():
        return pl.DataFrame()
    keys = ["condition", "model"] if "condition" in calls.columns else ["model"]
    return (
        calls.group_by(keys)
        .agg(
            pl.col("run_id").n_unique().alias("runs"),
            pl.len().alias("calls"),
            pl.col("prompt_tokens").sum(),
            pl.col("cached_tokens").sum(),
            pl.col("completion_tokens").sum(),
            total_cost().alias("cost_usd"),
            without_usage(),
        )
        .with_columns(
            (pl.col("cost_usd") / pl.col("runs")).alias("cost_per_run_usd"),
            (pl.col("cached_tokens") / pl.col("prompt_tokens").clip(1)).alias("cached_share"),
        )
        .sort(keys)
    )

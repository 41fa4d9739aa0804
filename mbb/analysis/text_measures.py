"""Text measures per run (one value per seed, for CIs and condition differences), metagaming
(Fig. 11) and the reasoning-effort table (Table 9).

`text_measures_by_run` is what `mbb.analysis.stats.condition_differences` and
`mbb.analysis.compare.condition_table` compare across conditions: the seed (run) is the unit, so a
condition difference comes with a bootstrap CI over seeds. Each measure's definition:

- rule_making: share of the run's rounds with rule-making (`mbb.analysis.rules`);
- rule_citation: share of rounds with a rule citation;
- rule_making_later: share of rounds in subruns 2+ with rule-making (Table 10's later
  columns: rules proposed afresh there, new or re-proposed);
- new_rules_later: share of rounds in subruns 2+ where a rule new to the run is stated;
- rule_carryover: share of rules stated in a subrun (not the last) that are stated again in
  the next subrun (a rule's transmission across the subrun boundary, read from text);
- forward_commitments: share of worker-rounds with a commitment scoped to future rounds;
- new_vocab_share, new_vocab_first, new_vocab_last: `mbb.analysis.linguistic`'s share of
  words new to the run, over all worker-subruns, the first subrun's and the last subrun's;
- metagaming: share of worker-rounds with metagaming evidence (when `evidence` is given).

Every measure is read from the negotiation text: a run without any (a centralized mechanism)
has none of them, n/a rather than 0 (`mbb.analysis._frames.measured_runs`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import polars as pl

from mbb.analysis._frames import (
    condition_of,
    labels_of,
    measured_runs,
    run_seeds,
    seed_of,
    utterances,
)
from mbb.analysis.measures import group_presence
from mbb.analysis.rules import forward_commitments, rule_statements

__all__ = [
    "TEXT_MEASURES",
    "TEXT_MEASURE_LABELS",
    "metagaming",
    "reasoning_effort_table",
    "seed_of",
    "text_measures_by_run",
]

TEXT_MEASURES: tuple[str, ...] = (
    "rule_making",
    "rule_citation",
    "rule_making_later",
    "new_rules_later",
    "rule_carryover",
    "forward_commitments",
    "new_vocab_share",
    "new_vocab_first",
    "new_vocab_last",
    "metagaming",
)
# how each of `TEXT_MEASURES` is named where people read it (tables, forest plots), with the
# unit of its share; `mbb.analysis.compare.MEASURE_LABELS` joins these to the outcome labels
TEXT_MEASURE_LABELS: dict[str, str] = {
    "rule_making": "Rule-making (share of rounds)",
    "rule_citation": "Rule citation (share of rounds)",
    "rule_making_later": "Rule-making in subruns 2+ (share of rounds)",
    "new_rules_later": "New rules in subruns 2+ (share of rounds)",
    "rule_carryover": "Rules carried to the next subrun (share of rules)",
    "forward_commitments": "Forward commitments (share of worker-rounds)",
    "new_vocab_share": "New vocabulary (share of words)",
    "new_vocab_first": "New vocabulary, first subrun (share of words)",
    "new_vocab_last": "New vocabulary, last subrun (share of words)",
    "metagaming": "Metagaming (share of worker-rounds)",
}
WR = ["run_id", "subrun", "round", "worker"]


def text_measures_by_run(
    tables: Mapping[str, pl.DataFrame],
    evidence: pl.DataFrame | None = None,
    *,
    reference: str | None = None,
) -> pl.DataFrame:
    """One row per run: condition, seed and the measures of `TEXT_MEASURES` (see the module
    docstring). tables: the run tables. evidence: the classifier's evidence rows (needed for
    metagaming only; None leaves it null). reference: the agents' instructions, whose words
    never count as new vocabulary (`mbb.analysis.linguistic`)."""
    from mbb.analysis.linguistic import worker_linguistics

    rounds = tables["rounds"].select("run_id", "subrun", "round").unique()
    st = rule_statements(tables)
    per_round = st.group_by("run_id", "subrun", "round").agg(
        (pl.col("role") == "making").any().alias("mk"),
        (pl.col("role") == "citation").any().alias("ct"),
        pl.col("new_to_run").any().alias("nw"),
    )
    r = rounds.join(per_round, on=["run_id", "subrun", "round"], how="left").with_columns(
        pl.col("mk", "ct", "nw").fill_null(False)
    )
    rules = r.group_by("run_id").agg(
        pl.col("mk").mean().alias("rule_making"),
        pl.col("ct").mean().alias("rule_citation"),
        pl.col("mk").filter(pl.col("subrun") > 1).mean().alias("rule_making_later"),
        pl.col("nw").filter(pl.col("subrun") > 1).mean().alias("new_rules_later"),
    )
    last = rounds.group_by("run_id").agg(pl.col("subrun").max().alias("smax"))
    stated = st.select("run_id", "rule", "subrun").unique()
    carry = (
        stated.join(last, on="run_id")
        .filter(pl.col("subrun") < pl.col("smax"))
        .join(
            stated.with_columns((pl.col("subrun") - 1).alias("subrun"), pl.lit(True).alias("n")),
            on=["run_id", "rule", "subrun"],
            how="left",
        )
        .group_by("run_id")
        .agg(pl.col("n").fill_null(False).mean().alias("rule_carryover"))
    )
    wr = tables["declarations"].select(WR).unique()
    fc = forward_commitments(tables).select(WR).unique().with_columns(pl.lit(True).alias("fc"))
    fwd = (
        wr.join(fc, on=WR, how="left")
        .group_by("run_id")
        .agg(pl.col("fc").fill_null(False).mean().alias("forward_commitments"))
    )
    ev = evidence if evidence is not None else _no_evidence()
    ling = worker_linguistics(tables, ev, reference=reference)
    smin = ling.group_by("run_id").agg(
        pl.col("subrun").min().alias("s0"), pl.col("subrun").max().alias("s1")
    )
    ling = ling.join(smin, on="run_id")
    vocab = ling.group_by("run_id").agg(
        pl.col("new_vocab_share").mean(),
        pl.col("new_vocab_share")
        .filter(pl.col("subrun") == pl.col("s0"))
        .mean()
        .alias("new_vocab_first"),
        pl.col("new_vocab_share")
        .filter(pl.col("subrun") == pl.col("s1"))
        .mean()
        .alias("new_vocab_last"),
    )
    out = run_seeds(tables)
    for part in (rules, carry, fwd, vocab):
        out = out.join(part, on="run_id", how="left")
    if evidence is not None:
        mg = (
            wr.join(
                ev.filter(pl.col("category") == "metagaming")
                .select(WR)
                .unique()
                .with_columns(pl.lit(True).alias("mg")),
                on=WR,
                how="left",
            )
            .group_by("run_id")
            .agg(pl.col("mg").fill_null(False).mean().alias("metagaming"))
        )
        out = out.join(mg, on="run_id", how="left")
    else:
        out = out.with_columns(pl.lit(None, pl.Float64).alias("metagaming"))
    spoke = pl.col("run_id").is_in(measured_runs(tables, "text").implode())
    out = out.with_columns(  # no negotiation text: nothing measured (n/a), not 0
        pl.when(spoke).then(pl.col(m)).alias(m) for m in TEXT_MEASURES
    )
    return out.select("run_id", "condition", "seed", *TEXT_MEASURES).sort(
        "condition", "seed", "run_id"
    )


def _no_evidence() -> pl.DataFrame:
    return pl.DataFrame(schema={"run_id": pl.String, "seq": pl.Int64, "category": pl.String})


def metagaming(
    tables: Mapping[str, pl.DataFrame], evidence: pl.DataFrame, *, examples: int = 3
) -> pl.DataFrame:
    """Fig. 11 (appendix B): evaluation awareness — a worker stops negotiating to consider
    whether the scenario is a test. Per condition and model: worker-rounds, those with
    metagaming evidence and their share, runs with any, and up to `examples` quoted
    utterances (run, seq: text) for reading.

    tables: the run tables. evidence: the classifier's evidence rows (its `metagaming` label,
    validated on the gold corpus's metagaming items by `mbb validate-classifier`).
    examples: how many utterances to quote per row."""
    wr = labels_of(condition_of(tables["declarations"].select(WR).unique(), tables), tables)
    hits = evidence.filter(pl.col("category") == "metagaming").select(*WR, "seq").unique()
    text = utterances(tables).select("run_id", "seq", "text")
    quoted = (
        labels_of(condition_of(hits, tables), tables)
        .join(text, on=["run_id", "seq"])
        .sort("run_id", "seq")
        .group_by("condition", "model")
        .agg(
            pl.format("{} #{}: {}", "run_id", "seq", "text").head(examples).alias("examples"),
            pl.col("run_id").n_unique().alias("runs_with"),
        )
    )
    mark = hits.select(WR).unique().with_columns(pl.lit(True).alias("mg"))
    g = (
        wr.join(mark, on=WR, how="left")
        .group_by("condition", "model")
        .agg(
            pl.len().alias("worker_rounds"),
            pl.col("mg").fill_null(False).sum().alias("with_metagaming"),
            pl.col("run_id").n_unique().alias("runs"),
        )
        .with_columns((pl.col("with_metagaming") / pl.col("worker_rounds")).alias("share"))
    )
    return (
        g.join(quoted, on=["condition", "model"], how="left")
        .with_columns(
            pl.col("runs_with").fill_null(0).cast(pl.Int64),
            pl.col("examples").fill_null(pl.lit([], pl.List(pl.String))),
        )
        .sort("condition", "model")
    )


_EFFORT = re.compile(r"reasoning_(none|minimal|low|medium|high)")
# Table 9's rows: the paper reports price-primary and scope reduction deepening with effort
# while relational and coalition behaviour stay at zero
TABLE9_GROUPS: dict[str, list[str]] = {
    "price_primary": ["price_primary"],
    "scope_reduction": ["scope_reduction"],
    "relational": ["reciprocity", "coalition_loyalty", "reputation"],
    "coalition": ["coalition_formation", "coalition_loyalty"],
    "rule_making_citation": ["rule_making_citation"],
}


def reasoning_effort_table(
    tables: Mapping[str, pl.DataFrame],
    wr_pred: pl.DataFrame,
    *,
    effort_of: Mapping[str, str] | None = None,
) -> pl.DataFrame:
    """Table 9: prevalence of strategy groups by reasoning effort, per model: worker-rounds,
    share with the group, and mean reasoning tokens per negotiator call (what the effort
    setting actually bought; null for scripted runs).

    tables: the run tables (with `llm_calls` for tokens). wr_pred: worker-round labels.
    effort_of: condition name -> effort level; default: read from the condition name
    (params/reasoning_low|medium|high.yaml name their conditions reasoning_<level>), and
    "unset" for conditions that name none. Groups: `TABLE9_GROUPS` (mbb's choice: the groups
    the paper's Table 9 discusses)."""
    wr = labels_of(condition_of(tables["declarations"].select(WR).unique(), tables), tables)
    if effort_of:
        eff = pl.col("condition").replace_strict(dict(effort_of), default="unset")
    else:
        eff = pl.col("condition").str.extract(_EFFORT.pattern, 1).fill_null("unset")
    wr = wr.with_columns(eff.alias("effort"))
    g = (
        group_presence(wr, wr_pred, TABLE9_GROUPS)
        .group_by("condition", "effort", "model", "group")
        .agg(
            pl.len().alias("worker_rounds"),
            pl.col("present").mean().alias("prevalence"),
        )
    )
    calls = tables.get("llm_calls")
    if calls is not None and not calls.is_empty() and "reasoning_tokens" in calls.columns:
        rt = (
            labels_of(
                condition_of(calls.filter(pl.col("role") == "negotiator").drop("model"), tables),
                tables,
            )
            .group_by("condition", "model")
            .agg(
                pl.col("reasoning_tokens")
                .cast(pl.Float64)
                .mean()
                .alias("reasoning_tokens_per_call")
            )
        )
        g = g.join(rt, on=["condition", "model"], how="left")
    else:
        g = g.with_columns(pl.lit(None, pl.Float64).alias("reasoning_tokens_per_call"))
    return g.sort("model", "group", "effort", "condition")

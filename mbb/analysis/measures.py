"""The paper's measures (SCARCE §5 and appendix C), each a tidy polars table.

Inputs are the tables from `mbb.core.tables` (with `runs`/`workers` from `with_run_info` where a
measure needs the condition's memory/bid regime or each worker's model) and, for behaviour
measures, the worker-round labels of a classifier (`worker_round_predictions`).
"model" is the paper's model column: the LLM name, or the persona for scripted workers.
A measure with a pooled and a per-run form is one function with `by=` ("condition" or
"run_id", see `mbb.analysis`), both forms computed by one body.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from mbb.analysis._frames import (
    By,
    by_keys,
    condition_of,
    labels_of,
    measured_runs,
    run_seeds,
)
from mbb.analysis.rules import rule_statements
from mbb.analysis.stats import chi2_contingency
from mbb.core.taxonomy import CATEGORIES, CATEGORY_NAMES

__all__ = [
    "GROUPS",
    "behaviour_drift",
    "behaviour_prevalence",
    "contested_win_rates",
    "direct_message_use",
    "drift_tests",
    "mean_bid",
    "paired_seed_difference",
    "relational_vs_bid",
    "rich_worker",
    "rich_worker_paired",
    "rule_dynamics",
    "seed_bootstrap_ci",
    "starting_state_seeds",
    "structural_metrics",
    "termination_discount",
    "treated_seats",
    "urgency_premium",
    "urgency_premium_paired",
    "worker_rounds",
]

WR = ["run_id", "subrun", "round", "worker"]
RELATIONAL = [c.name for c in CATEGORIES if c.marker == "relational"]
NON_RELATIONAL = [c.name for c in CATEGORIES if c.marker == "non_relational"]
# strategy groups used by the drift figures (15-17)
GROUPS: dict[str, list[str]] = {
    "relational": RELATIONAL,
    "non_relational": NON_RELATIONAL,
    "price_primary": ["price_primary"],
    "rule_making_citation": ["rule_making_citation"],
    "renegotiation": ["renegotiation"],
}


def worker_rounds(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per worker per round it declared in: final bid and duration (after revisions),
    with condition and model."""
    d = (
        tables["declarations"]
        .sort("seq")
        .group_by(WR)
        .agg(
            pl.col("bid").last(),
            pl.col("duration").last(),
            pl.col("bid").first().alias("first_bid"),
        )
    )
    return labels_of(condition_of(d, tables), tables).sort(WR)


def behaviour_prevalence(
    tables: Mapping[str, pl.DataFrame],
    wr_pred: pl.DataFrame,
    categories: Sequence[str] = CATEGORY_NAMES,
    *,
    by: By = "condition",
) -> pl.DataFrame:
    """Fig. 6 (left): the share of worker-rounds showing each category (`prevalence`, of
    `worker_rounds`, `n` of them).

    `tables`: one or more conditions' tables (seed from `runs` of `with_run_info`, else from
    the run id); `wr_pred`: worker-round labels (`worker_round_predictions`); `categories`: the
    categories to report (default all 21; any label of `wr_pred`, e.g. a separately reported
    one, may be named); `by`: "condition" per condition and model (the paper's figure),
    "run_id" per run with every model pooled (the seed is the unit of a CI)."""
    keys = by_keys(by, "behaviour_prevalence", pooled=["condition", "model"])
    wr = worker_rounds(tables)
    denom = wr.group_by(keys).agg(pl.len().alias("worker_rounds"))
    hits = (
        wr.join(wr_pred.select(*WR, "category").unique(), on=WR)
        .group_by(*keys, "category")
        .agg(pl.len().alias("n"))
    )
    cats = pl.DataFrame({"category": list(categories)}, schema={"category": pl.String})
    out = (
        denom.join(cats, how="cross")
        .join(hits, on=[*keys, "category"], how="left")
        .with_columns(pl.col("n").fill_null(0).cast(pl.Int64))
        .with_columns((pl.col("n") / pl.col("worker_rounds")).alias("prevalence"))
    )
    if by == "condition":
        return out.sort("condition", "model", "category")
    return run_seeds(tables).join(out, on="run_id").sort("condition", "seed", "category")


def direct_message_use(tables: Mapping[str, pl.DataFrame], *, by: By = "condition") -> pl.DataFrame:
    """Fig. 6 (right): private (direct) messages per worker-round (`direct_per_worker_round`,
    null when there is no worker-round) and their share of the messages (`direct_share`, null
    when there is no message).

    `tables`: one or more conditions' tables (seed from `runs` of `with_run_info`, else from
    the run id); `by`: "condition" per condition and model (the paper's figure), "run_id" per
    run with every model pooled, every run of the `runs` table included."""
    keys = by_keys(by, "direct_message_use", pooled=["condition", "model"])
    wr = worker_rounds(tables).group_by(keys).agg(pl.len().alias("worker_rounds"))
    g = (
        labels_of(condition_of(tables["messages"], tables), tables)
        .group_by(keys)
        .agg(pl.len().alias("messages"), pl.col("to").is_not_null().sum().alias("direct_messages"))
    )
    if by == "condition":
        rows = wr.select(keys)
    else:
        rows = run_seeds(tables, tables["runs"].select("run_id") if "runs" in tables else None)
        wr = wr.with_columns(pl.col("worker_rounds").cast(pl.Int64))
    out = (
        rows.join(wr, on=keys, how="left")
        .join(g, on=keys, how="left")
        .with_columns(
            pl.col("worker_rounds").fill_null(0),
            pl.col("messages", "direct_messages").fill_null(0).cast(pl.Int64),
        )
        .with_columns(
            pl.when(pl.col("worker_rounds") > 0)
            .then(pl.col("direct_messages") / pl.col("worker_rounds"))
            .alias("direct_per_worker_round"),
            pl.when(pl.col("messages") > 0)
            .then(pl.col("direct_messages") / pl.col("messages"))
            .alias("direct_share"),
        )
    )
    if by == "condition":
        return out.sort("condition", "model")
    return out.select(
        "condition",
        "seed",
        "run_id",
        "worker_rounds",
        "messages",
        "direct_messages",
        "direct_share",
        "direct_per_worker_round",
    ).sort("condition", "seed")


def rule_dynamics(tables: Mapping[str, pl.DataFrame], evidence: pl.DataFrame) -> pl.DataFrame:
    """Fig. 7 / Table 10: share of rounds with rule-making, rule-citation and renegotiation,
    by condition, bid regime (revisable/fixed) and subrun.

    Rule-making and citation are read from the rule statements in the text, whatever the
    rule (`mbb.analysis.rules.rule_statements`): a round has rule-making when some utterance
    states a rule for the first time in the run (or repeats it in the round it was first
    stated), rule-citation when some utterance invokes a rule stated in an earlier round or
    refers to it as agreed. Renegotiation comes from the classifier's `evidence`. A run
    without negotiation text (a centralized mechanism) has no value: its rounds are not counted
    (`rounds_with` and the share are n/a where no round had text, never 0).
    """
    st = rule_statements(tables)
    per_round = st.group_by("run_id", "subrun", "round").agg(
        (pl.col("role") == "making").any().alias("rule_making"),
        (pl.col("role") == "citation").any().alias("rule_citation"),
    )
    reneg = (
        evidence.filter(pl.col("category") == "renegotiation")
        .select("run_id", "subrun", "round")
        .unique()
        .with_columns(pl.lit(True).alias("renegotiation"))
    )
    rounds = tables["rounds"].select("run_id", "subrun", "round").unique()
    r = (
        rounds.join(per_round, on=["run_id", "subrun", "round"], how="left")
        .join(reneg, on=["run_id", "subrun", "round"], how="left")
        .with_columns(pl.col("rule_making", "rule_citation", "renegotiation").fill_null(False))
        .with_columns(  # a round of a run without text: nothing measured (n/a), not "absent"
            pl.when(pl.col("run_id").is_in(measured_runs(tables, "text").implode()))
            .then(pl.col(c))
            .alias(c)
            for c in ("rule_making", "rule_citation", "renegotiation")
        )
    )
    r = condition_of(r, tables)
    if "runs" in tables:
        r = r.join(tables["runs"].select("run_id", "bids"), on="run_id", how="left")
    else:
        r = r.with_columns(pl.lit(None, pl.String).alias("bids"))
    long = r.unpivot(
        index=["condition", "bids", "run_id", "subrun", "round"],
        on=["rule_making", "rule_citation", "renegotiation"],
        variable_name="behaviour",
        value_name="present",
    )
    return (
        long.group_by("condition", "bids", "subrun", "behaviour")
        .agg(
            pl.len().alias("rounds"),
            pl.when(pl.col("present").is_not_null().any())
            .then(pl.col("present").sum())
            .alias("rounds_with"),
            pl.col("present").mean().alias("share_of_rounds"),
        )
        .sort("condition", "behaviour", "subrun")
    )


def _start_state(tables: Mapping[str, pl.DataFrame], col: str, pick: str) -> pl.DataFrame:
    """Per (run, worker): group 'urgent'/'rich' (extreme `col` at subrun 1 when workers
    differ), 'others', or 'uniform' when all workers start equal."""
    sw = tables["subrun_workers"].filter(pl.col("subrun") == pl.col("subrun").min().over("run_id"))
    ext = pl.col(col).min() if pick == "min" else pl.col(col).max()
    g = sw.group_by("run_id").agg(ext.alias("ext"), pl.col(col).n_unique().alias("levels"))
    return sw.join(g, on="run_id").select(
        "run_id",
        "worker",
        pl.when(pl.col("levels") == 1)
        .then(pl.lit("uniform"))
        .when(pl.col(col) == pl.col("ext"))
        .then(pl.lit("urgent" if pick == "min" else "rich"))
        .otherwise(pl.lit("others"))
        .alias("group"),
        pl.col(col).alias(f"start_{col}"),
    )


def urgency_premium(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Fig. 9 / Table 4: the worker with the closest deadline vs the others, by subrun — mean
    bid, mean requested duration, rounds per worker and withdrawals; `bid_ratio` is the
    group's mean bid over the others' (>1 early = urgency premium, <1 later = termination
    discount); `note` says why a ratio is missing. The others are other personas too, so this
    mixes the deadline's effect with the urgent seat's strategy; `urgency_premium_paired`
    compares the same seat and persona in the base run of the same seed."""
    grp = _start_state(tables, "deadline_s", "min")
    wr = worker_rounds(tables).join(grp, on=["run_id", "worker"])
    g = wr.group_by("condition", "subrun", "group").agg(
        pl.col("bid").mean().alias("mean_bid"),
        pl.col("duration").mean().alias("mean_duration"),
        (pl.len() / pl.struct("run_id", "worker").n_unique()).alias("rounds_per_worker"),
    )
    wd = (
        condition_of(tables["withdrawals"], tables)
        .join(grp, on=["run_id", "worker"])
        .group_by("condition", "subrun", "group")
        .agg(pl.len().alias("withdrawals"))
    )
    g = g.join(wd, on=["condition", "subrun", "group"], how="left").with_columns(
        pl.col("withdrawals").fill_null(0).cast(pl.Int64)
    )
    others = g.filter(pl.col("group") == "others").select(
        "condition", "subrun", pl.col("mean_bid").alias("others_bid")
    )
    return (
        g.join(others, on=["condition", "subrun"], how="left")
        .with_columns((pl.col("mean_bid") / pl.col("others_bid")).alias("bid_ratio"))
        .with_columns(
            # a missing ratio says why (it read a bare n/a)
            pl.when(pl.col("bid_ratio").is_not_null())
            .then(None)
            .when(pl.col("group") == "uniform")
            .then(pl.lit("no bid ratio: every worker starts with the same deadline"))
            .otherwise(pl.lit("no bid ratio: the others declared no bid in this subrun"))
            .alias("note")
        )
        .drop("others_bid")
        .sort("condition", "subrun", "group")
    )


def _wins(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Per worker-round: won (first in the published schedule) and contested (>= 2 declared)."""
    r = tables["rounds"].select(
        "run_id",
        "subrun",
        "round",
        pl.col("order").list.first().alias("winner"),
        pl.col("order").list.len().alias("n_scheduled"),
    )
    wr = worker_rounds(tables)
    n = wr.group_by("run_id", "subrun", "round").agg(pl.len().alias("n_declared"))
    return (
        wr.join(r, on=["run_id", "subrun", "round"], how="left")
        .join(n, on=["run_id", "subrun", "round"])
        .with_columns(
            (pl.col("winner") == pl.col("worker")).fill_null(False).alias("won"),
            (pl.col("n_declared") >= 2).alias("contested"),
        )
    )


def rich_worker(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Table 5: the worker with the largest starting budget vs the others, by subrun — credits
    spent, wins (first place in the schedule), rounds and win rate, per worker. The others are
    other personas too; `rich_worker_paired` compares the same seat and persona in the base run
    of the same seed."""
    grp = _start_state(tables, "budget", "max")
    w = _wins(tables).join(grp, on=["run_id", "worker"])
    g = w.group_by("condition", "subrun", "group").agg(
        pl.struct("run_id", "worker").n_unique().alias("workers"),
        pl.col("won").sum().alias("wins"),
        pl.len().alias("rounds"),
    )
    pay = (
        condition_of(tables["payments"], tables)
        .join(grp, on=["run_id", "worker"])
        .group_by("condition", "subrun", "group")
        .agg(pl.col("amount").sum().alias("spent"))
    )
    return (
        g.join(pay, on=["condition", "subrun", "group"], how="left")
        .with_columns(
            pl.col("spent").fill_null(0),
        )
        .with_columns(
            (pl.col("spent") / pl.col("workers")).alias("spend_per_worker"),
            (pl.col("wins") / pl.col("workers")).alias("wins_per_worker"),
            (pl.col("wins") / pl.col("rounds")).alias("win_rate"),
        )
        .sort("condition", "subrun", "group")
    )


def contested_win_rates(
    tables: Mapping[str, pl.DataFrame], depleted_below: float = 0.5, *, by: By = "condition"
) -> pl.DataFrame:
    """Table 7: win rate in contested rounds at full vs depleted budget. A worker's budget is
    'depleted' at a round when its balance at the round's start is below `depleted_below` of
    its starting budget (balance = subrun-start budget minus this subrun's earlier payments).

    by="condition", per condition, start-state group and budget state (the paper's table):
    contested rounds, wins, `win_rate` and `win_excess`, the mean of won minus 1 / (workers
    that declared in the round), the win rate above the chance of a random winner, since
    depleted rounds come later, when fewer may contend (mbb's choice; the paper reports the
    raw rate).

    by="run_id", per run, within workers: each worker's win rate in contested rounds at full
    minus at depleted budget (`difference`), averaged over the run's workers that had rounds in
    both states (`workers`); a run with none has no row. Within workers, so the personas that
    run their budget down (the high bidders) do not read as "depleted workers win more" (mbb's
    choice; the paper pools the rounds). `adjusted_difference`: the same with each round's win
    less its chance (`full_excess`, `depleted_excess` are its two sides), so that fewer
    contenders late in a run do not read as a budget effect.

    `tables`: one or more conditions' tables (seed from `runs` of `with_run_info`, else from
    the run id); `depleted_below`: the share of the starting budget under which a balance is
    depleted; `by`: "condition" or "run_id", as above."""
    by_keys(by, "contested_win_rates", pooled=["condition"])
    w = _contested_rounds(tables, depleted_below)
    if by == "condition":
        return (
            w.group_by("condition", "group", "budget_state")
            .agg(
                pl.len().alias("contested_rounds"),
                pl.col("won").sum().alias("wins"),
                pl.col("won").mean().alias("win_rate"),
                pl.col("win_excess").mean().alias("win_excess"),
            )
            .sort("condition", "group", "budget_state")
        )
    full, depleted = pl.col("budget_state") == "full", pl.col("budget_state") == "depleted"
    per_worker = (
        w.group_by("condition", "run_id", "worker")
        .agg(
            pl.col("won").filter(full).mean().alias("full"),
            pl.col("won").filter(depleted).mean().alias("depleted"),
            pl.col("win_excess").filter(full).mean().alias("full_x"),
            pl.col("win_excess").filter(depleted).mean().alias("depleted_x"),
        )
        .drop_nulls(["full", "depleted"])
    )
    seeds = run_seeds(tables, w.select("run_id").unique()).select("run_id", "seed")
    return (
        per_worker.group_by("condition", "run_id")
        .agg(
            pl.len().alias("workers"),
            pl.col("full").mean().alias("full_win_rate"),
            pl.col("depleted").mean().alias("depleted_win_rate"),
            (pl.col("full") - pl.col("depleted")).mean().alias("difference"),
            pl.col("full_x").mean().alias("full_excess"),
            pl.col("depleted_x").mean().alias("depleted_excess"),
            (pl.col("full_x") - pl.col("depleted_x")).mean().alias("adjusted_difference"),
        )
        .join(seeds, on="run_id")
        .sort("condition", "seed")
    )


STARTING_STATE_MEASURES: dict[str, tuple[str, ...]] = {
    "urgency": ("mean_bid", "mean_duration"),
    "rich_worker": ("spend_per_worker", "wins_per_worker", "win_rate"),
    "contested": ("win_rate",),
}


def starting_state_seeds(
    tables: Mapping[str, pl.DataFrame], depleted_below: float = 0.5
) -> pl.DataFrame:
    """The starting-state figures' means with their 95 % CI over seeds (a run's rounds are not
    independent: each run gives one value, `mbb.analysis.stats.seed_summary` resamples them).
    `urgency_premium`, `rich_worker` and `contested_win_rates` pool every worker-round of a
    condition and give no interval; this gives the same measures per run first.

    Long form: figure ('urgency', 'rich_worker', 'contested'), condition, group (urgent / rich,
    others, uniform), subrun (null for 'contested'), budget_state (null but for
    'contested'), measure (`STARTING_STATE_MEASURES`), n (seeds with a value), mean, ci_low,
    ci_high (null with one seed: no interval). tables: one or more conditions' tables;
    depleted_below: as in `contested_win_rates`."""
    from mbb.analysis.stats import seed_summary

    keys = ["condition", "subrun", "group"]
    grp = _start_state(tables, "deadline_s", "min")
    urgent = (
        worker_rounds(tables)
        .join(grp, on=["run_id", "worker"])
        .group_by(*keys, "run_id")
        .agg(
            pl.col("bid").mean().alias("mean_bid"), pl.col("duration").mean().alias("mean_duration")
        )
    )
    rich_grp = _start_state(tables, "budget", "max")
    w = _wins(tables).join(rich_grp, on=["run_id", "worker"])
    pay = (
        condition_of(tables["payments"], tables)
        .join(rich_grp, on=["run_id", "worker"])
        .group_by(*keys, "run_id")
        .agg(pl.col("amount").sum().alias("spent"))
    )
    rich = (
        w.group_by(*keys, "run_id")
        .agg(
            pl.struct("worker").n_unique().alias("workers"),
            pl.col("won").sum().alias("wins"),
            pl.len().alias("rounds"),
        )
        .join(pay, on=[*keys, "run_id"], how="left")
        .select(
            *keys,
            "run_id",
            (pl.col("spent").fill_null(0) / pl.col("workers")).alias("spend_per_worker"),
            (pl.col("wins") / pl.col("workers")).alias("wins_per_worker"),
            (pl.col("wins") / pl.col("rounds")).alias("win_rate"),
        )
    )
    contested = (
        _contested_rounds(tables, depleted_below)
        .group_by("condition", "group", "budget_state", "run_id")
        .agg(pl.col("won").mean().alias("win_rate"))
    )
    m = STARTING_STATE_MEASURES
    parts = [
        seed_summary(urgent, keys, m["urgency"]).with_columns(pl.lit("urgency").alias("figure")),
        seed_summary(rich, keys, m["rich_worker"]).with_columns(
            pl.lit("rich_worker").alias("figure")
        ),
        seed_summary(
            contested, ["condition", "group", "budget_state"], m["contested"]
        ).with_columns(pl.lit("contested").alias("figure")),
    ]
    cols = ["figure", "condition", "group", "subrun", "budget_state", "measure", "n", "mean"]
    return (
        pl.concat(parts, how="diagonal_relaxed")
        .select(*cols, "ci_low", "ci_high")
        .sort("figure", "condition", "group", "subrun", "budget_state", "measure", nulls_last=True)
    )


def _contested_rounds(tables: Mapping[str, pl.DataFrame], depleted_below: float) -> pl.DataFrame:
    """Contested worker-rounds with won, win_excess (won - 1 / n_declared), the start-state
    group and budget_state."""
    grp = _start_state(tables, "budget", "max")
    w = (
        _wins(tables)
        .filter(pl.col("contested"))
        .join(grp, on=["run_id", "worker"])
        .with_columns(
            (pl.col("won").cast(pl.Float64) - 1.0 / pl.col("n_declared")).alias("win_excess")
        )
    )
    sw = tables["subrun_workers"].select(
        "run_id", "subrun", "worker", pl.col("budget").alias("subrun_budget")
    )
    pay = (
        tables["payments"]
        .group_by("run_id", "subrun", "round", "worker")
        .agg(pl.col("amount").sum())
    )
    paid_before = (
        w.select(*WR)
        .join(pay.rename({"round": "pr"}), on=["run_id", "subrun", "worker"], how="left")
        .filter(pl.col("pr").is_null() | (pl.col("pr") < pl.col("round")))
        .group_by(WR)
        .agg(pl.col("amount").sum().alias("paid_before"))
    )
    w = w.join(sw, on=["run_id", "subrun", "worker"]).join(paid_before, on=WR, how="left")
    w = w.with_columns(
        (pl.col("subrun_budget") - pl.col("paid_before").fill_null(0)).alias("balance")
    ).with_columns(
        pl.when(pl.col("balance") < depleted_below * pl.col("start_budget"))
        .then(pl.lit("depleted"))
        .otherwise(pl.lit("full"))
        .alias("budget_state")
    )
    return w


def _relational_rounds(tables: Mapping[str, pl.DataFrame], wr_pred: pl.DataFrame) -> pl.DataFrame:
    """Per round (condition, run_id, subrun, round): the mean declared bid and the share of its
    worker-rounds with a relational behaviour, the unit of Fig. 12 pooled or per run. In round
    order, so that rounds with equal mean bids fall into the same bins on every call."""
    rel = (
        wr_pred.filter(pl.col("category").is_in(RELATIONAL))
        .select(WR)
        .unique()
        .with_columns(pl.lit(True).alias("rel"))
    )
    return (
        worker_rounds(tables)
        .join(rel, on=WR, how="left")
        .with_columns(pl.col("rel").fill_null(False))
        .group_by("condition", "run_id", "subrun", "round")
        .agg(
            pl.col("bid").mean().cast(pl.Float64).alias("mean_bid"),
            pl.col("rel").mean().alias("relational_share"),
        )
        .sort("condition", "run_id", "subrun", "round")
    )


def relational_vs_bid(
    tables: Mapping[str, pl.DataFrame],
    wr_pred: pl.DataFrame,
    bins: int = 5,
    *,
    by: By = "condition",
) -> pl.DataFrame:
    """Fig. 12: a round's mean declared bid against its relational share (the share of its
    worker-rounds with a relational behaviour).

    by="condition" (the paper's figure): rounds binned by their mean bid (`bins` quantile bins
    per condition); per bin the rounds, their mean bid and relational share; `corr` is the
    Pearson correlation of round mean bid and relational share over the condition's rounds.

    by="run_id", over the run's rounds: `corr` (within one run, so runs that differ in bid
    level do not make the correlation; null when the run's shares are constant) and
    `high_minus_low` = mean relational share of the rounds above the run's median mean bid
    minus that of the rounds at or below it (mbb's choice of a per-run form; the paper pools
    rounds).

    `tables`: one or more conditions' tables (seed from `runs` of `with_run_info`, else from
    the run id); `wr_pred`: worker-round labels (`worker_round_predictions`); `bins`: bins of
    the pooled table; `by`: "condition" or "run_id", as above."""
    keys = by_keys(by, "relational_vs_bid", pooled=["condition"])
    r = _relational_rounds(tables, wr_pred)
    corr = pl.corr("mean_bid", "relational_share").alias("corr")
    if by == "run_id":
        high = pl.col("mean_bid") > pl.col("mean_bid").median()
        out = r.group_by(keys).agg(
            pl.len().alias("rounds"),
            pl.col("relational_share").mean(),
            corr,
            (
                pl.col("relational_share").filter(high).mean()
                - pl.col("relational_share").filter(~high).mean()
            ).alias("high_minus_low"),
        )
        out = out.with_columns(pl.col("corr").fill_nan(None))
        return run_seeds(tables).join(out, on="run_id").sort("condition", "seed")
    r = r.with_columns(
        (pl.col("mean_bid").rank("ordinal").over(keys) * bins / (pl.len().over(keys) + 1))
        .floor()
        .cast(pl.Int64)
        .alias("bid_bin")
    )
    return (
        r.group_by(*keys, "bid_bin")
        .agg(
            pl.len().alias("rounds"),
            pl.col("mean_bid").mean().alias("mean_bid"),
            pl.col("relational_share").mean().alias("relational_share"),
        )
        .join(r.group_by(keys).agg(corr), on=keys)
        # constant shares (a condition with no relational round): no correlation, null, not
        # NaN (it leaked "Out of range float values are not JSON compliant" into a report)
        .with_columns(pl.col("corr").fill_nan(None))
        .sort("condition", "bid_bin")
    )


def mean_bid(tables: Mapping[str, pl.DataFrame], *, by: By = "condition") -> pl.DataFrame:
    """Fig. 13: mean declared bid (after revisions) by subrun, with its worker-rounds.

    by="condition": per condition, starting budgets (`budgets`: "even", or "uneven" when the
    workers of a run start with different budgets) and model (the paper's figure); by="run_id":
    per run, with `drift` = the run's last subrun's mean bid minus its first's (null for a run
    with bids in one subrun only).

    `tables`: one or more conditions' tables (seed from `runs` of `with_run_info`, else from
    the run id); `by`: "condition" or "run_id", as above."""
    keys = by_keys(
        by,
        "mean_bid",
        pooled=["condition", "budgets", "model"],
        per_run=["condition", "seed", "run_id"],
    )
    wr = worker_rounds(tables)
    if by == "condition":
        sw = tables["subrun_workers"].filter(
            pl.col("subrun") == pl.col("subrun").min().over("run_id")
        )
        regime = sw.group_by("run_id").agg(
            pl.when(pl.col("budget").n_unique() == 1)
            .then(pl.lit("even"))
            .otherwise(pl.lit("uneven"))
            .first()
            .alias("budgets")
        )
        wr = wr.join(regime, on="run_id")
    else:
        wr = wr.join(
            run_seeds(tables, wr.select("run_id").unique()).select("run_id", "seed"), on="run_id"
        )
    per = wr.group_by(*keys, "subrun").agg(
        pl.len().alias("worker_rounds"), pl.col("bid").mean().alias("mean_bid")
    )
    if by == "condition":
        return per.sort("condition", "model", "subrun")
    drift = per.sort("subrun").group_by("run_id").agg(_last_minus_first("mean_bid").alias("drift"))
    return per.join(drift, on="run_id").sort("condition", "seed", "subrun")


def _last_minus_first(column: str) -> pl.Expr:
    """A drift: the last level's value minus the first's, null when fewer than two levels have
    one (a run of one subrun has no drift; 0 would read as "no change")."""
    col = pl.col(column).drop_nulls()
    return pl.when(col.len() >= 2).then(col.last() - col.first())


def _winners(tables: Mapping[str, pl.DataFrame]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rounds with winner and winning bid, consecutive-round pairs with `repeat` and its
    chance level). A run in which no bid was declared (`measured_runs(tables, "bids")`: a
    centralized mechanism without bids) has no winning bid: null, not the 0 its rounds record
    (Table 8 read "0 0 0 0" for it)."""
    declared = measured_runs(tables, "bids").implode()
    r = (
        tables["rounds"]
        .select(
            "run_id",
            "subrun",
            "round",
            pl.col("order").list.first().alias("winner"),
            pl.when(pl.col("run_id").is_in(declared))
            .then(pl.col("bids").list.first())
            .alias("winning_bid"),
            "candidates",
        )
        .sort("run_id", "subrun", "round")
    )
    r = r.with_columns(pl.col("winner").shift(1).over("run_id", "subrun").alias("prev"))
    pairs = r.filter(pl.col("prev").is_not_null()).with_columns(
        (pl.col("winner") == pl.col("prev")).cast(pl.Float64).alias("repeat"),
        pl.when(pl.col("candidates").list.contains(pl.col("prev")))
        .then(1.0 / pl.col("candidates").list.len())
        .otherwise(0.0)
        .alias("chance"),
    )
    return r, pairs


def structural_metrics(tables: Mapping[str, pl.DataFrame], *, by: By = "condition") -> pl.DataFrame:
    """Table 8: repeat_win_rate and its chance level (the previous winner, if a candidate
    again, wins by chance with 1/n); winning_bid_drift (median winning bid of the last subrun
    minus the first's; null with rounds in one subrun only); rounds_participated (mean rounds
    per worker-subrun).

    by="condition": the paper's table, long (condition, model, subrun, metric, value), with
    median_winning_bid per subrun and message_chars per message besides, and
    rounds_participated and message_chars per model (the others: model "all").
    by="run_id": one row per run (every run of the `runs` table), wide, with `repeat_excess`
    (rate minus chance).

    `tables`: one or more conditions' tables (seed from `runs` of `with_run_info`, else from
    the run id); `by`: "condition" or "run_id", as above."""
    keys = by_keys(by, "structural_metrics", pooled=["condition"])
    by_model = [*keys, "model"] if by == "condition" else keys
    r, pairs = _winners(tables)
    if by == "condition":
        r, pairs = condition_of(r, tables), condition_of(pairs, tables)
    rep = pairs.group_by(keys).agg(
        pl.col("repeat").mean().alias("repeat_win_rate"),
        pl.col("chance").mean().alias("repeat_win_chance"),
    )
    med = r.group_by(*keys, "subrun").agg(
        pl.col("winning_bid").median().cast(pl.Float64).alias("median_winning_bid")
    )
    drift = (
        med.sort("subrun")
        .group_by(keys)
        .agg(_last_minus_first("median_winning_bid").alias("winning_bid_drift"))
    )
    part = (
        worker_rounds(tables)
        .group_by(*dict.fromkeys([*by_model, "run_id", "worker", "subrun"]))
        .agg(pl.len().alias("n"))
        .group_by(by_model)
        .agg(pl.col("n").mean().cast(pl.Float64).alias("rounds_participated"))
    )
    if by == "run_id":
        runs = run_seeds(tables, tables["runs"].select("run_id") if "runs" in tables else None)
        return (
            runs.join(rep, on="run_id", how="left")
            .join(drift, on="run_id", how="left")
            .join(part, on="run_id", how="left")
            .with_columns(
                (pl.col("repeat_win_rate") - pl.col("repeat_win_chance")).alias("repeat_excess")
            )
            .sort("condition", "seed")
        )
    ml = (
        labels_of(condition_of(tables["messages"], tables), tables)
        .group_by(by_model)
        .agg(pl.col("text").str.len_chars().mean().cast(pl.Float64).alias("message_chars"))
    )
    no_subrun = pl.lit(None, pl.Int64).alias("subrun")
    out = [
        rep.unpivot(index=keys, variable_name="metric").with_columns(
            pl.lit("all").alias("model"), no_subrun
        ),
        med.unpivot(index=[*keys, "subrun"], variable_name="metric").with_columns(
            pl.lit("all").alias("model")
        ),
        drift.unpivot(index=keys, variable_name="metric").with_columns(
            pl.lit("all").alias("model"), no_subrun
        ),
        part.unpivot(index=by_model, variable_name="metric").with_columns(no_subrun),
        ml.unpivot(index=by_model, variable_name="metric").with_columns(no_subrun),
    ]
    cols = ["condition", "model", "subrun", "metric", "value"]
    return pl.concat([o.select(cols) for o in out]).sort("condition", "metric", "model", "subrun")


def group_presence(
    worker_rounds: pl.DataFrame,
    wr_pred: pl.DataFrame,
    groups: Mapping[str, Sequence[str]] = GROUPS,
) -> pl.DataFrame:
    """Every worker-round x strategy group, with `present` = the round shows a category of the
    group. worker_rounds: one row per worker-round (`WR` columns and any labels to keep).
    wr_pred: worker-round labels (`category`). groups: group name -> its categories."""
    gmap = pl.DataFrame(
        [(g, c) for g, cs in groups.items() for c in cs],
        schema=["group", "category"],
        orient="row",
    )
    hits = (
        wr_pred.select(*WR, "category")
        .unique()
        .join(gmap, on="category")
        .select(*WR, "group")
        .unique()
        .with_columns(pl.lit(True).alias("present"))
    )
    grid = worker_rounds.join(pl.DataFrame({"group": list(groups)}), how="cross")
    return grid.join(hits, on=[*WR, "group"], how="left").with_columns(
        pl.col("present").fill_null(False)
    )


def behaviour_drift(
    tables: Mapping[str, pl.DataFrame],
    wr_pred: pl.DataFrame,
    level: str = "subrun",
    *,
    by: By = "condition",
    groups: Mapping[str, Sequence[str]] = GROUPS,
) -> pl.DataFrame:
    """Figs. 15-16: the prevalence of each strategy group by subrun or by round.

    by="condition": per condition, model, group and level, its worker-rounds and prevalence
    (the paper's figures). by="run_id": per run and group, its prevalence in the run's first
    and last subrun (or round) and `delta` = last minus first, the per-run form of
    `drift_tests`' delta (mbb's choice: the paper tests pooled worker-rounds, which treats a
    run's rounds as independent; null when the run has one level); `levels`: the levels the
    run has.

    `tables`: one or more conditions' tables (seed from `runs` of `with_run_info`, else from
    the run id); `wr_pred`: worker-round labels (`worker_round_predictions`); `level`:
    "subrun" or "round" (the round number within its subrun); `by`: "condition" or "run_id",
    as above; `groups`: group name -> its categories (default `GROUPS`)."""
    if level not in ("subrun", "round"):
        raise ValueError(f"level must be 'subrun' or 'round', got {level!r}")
    keys = by_keys(by, "behaviour_drift", pooled=["condition", "model"])
    per = (
        group_presence(worker_rounds(tables), wr_pred, groups)
        .group_by(*keys, "group", level)
        .agg(pl.len().alias("worker_rounds"), pl.col("present").mean().alias("prevalence"))
    )
    if by == "condition":
        return per.sort("condition", "model", "group", level)
    out = (
        per.sort(level)
        .group_by("run_id", "group")
        .agg(
            pl.col("prevalence").first().alias("first"),
            pl.col("prevalence").last().alias("last"),
            pl.len().alias("levels"),
        )
        .with_columns(
            pl.when(pl.col("levels") >= 2).then(pl.col("last") - pl.col("first")).alias("delta")
        )
    )
    return run_seeds(tables).join(out, on="run_id").sort("condition", "seed", "group")


def drift_tests(
    tables: Mapping[str, pl.DataFrame],
    wr_pred: pl.DataFrame,
    level: str = "subrun",
    by_model: bool = True,
) -> pl.DataFrame:
    """Fig. 17: does a group's prevalence change across subruns (or rounds)? Pearson
    chi-square test of independence on the level × present/absent table, per condition
    (and model); `delta` = last level's prevalence minus the first's. With one level, or a
    group present in every worker-round or in none, there is nothing to test: chi2 and
    p_value are null (`chi2_contingency`), and delta too with one level."""
    g = group_presence(worker_rounds(tables), wr_pred)
    keys = ["condition", "model", "group"] if by_model else ["condition", "group"]
    counts = (
        g.group_by([*keys, level])
        .agg(pl.col("present").sum().alias("yes"), (~pl.col("present")).sum().alias("no"))
        .sort([*keys, level])
    )
    rows = []
    for key, part in counts.group_by(keys, maintain_order=True):
        tab = part.select("yes", "no").to_numpy()
        stat, dof, p = chi2_contingency(tab)
        tot = tab.sum(axis=1)
        prev = np.divide(tab[:, 0], tot, out=np.zeros(len(tot)), where=tot > 0)
        delta = float(prev[-1] - prev[0]) if part.height >= 2 else None
        rows.append((*key, int(part.height), stat, dof, p, delta))
    schema = {
        **{k: pl.String for k in keys},
        "levels": pl.Int64,
        "chi2": pl.Float64,
        "dof": pl.Int64,
        "p_value": pl.Float64,
        "delta": pl.Float64,
    }
    return (
        pl.DataFrame(rows, schema=schema, orient="row")
        .with_columns(pl.col("chi2", "p_value").fill_nan(None))
        .sort(keys)
    )


# --- per-seed values and paired, seat-balanced comparisons ---------------------------------------
# Confidence intervals are taken over seeds (a run is the unit: its rounds are not independent).
# A treated condition is compared with the base run of the same seed: the workload design and,
# under `workers.seating: rotate`, the persona in every seat depend on the seed alone, so the
# seat that differs (W1's deadline or budget) meets the same persona and the same tasks in both.


def seed_bootstrap_ci(
    values: Sequence[float] | np.ndarray, *, level: float = 0.95, n_boot: int = 4000, seed: int = 0
) -> tuple[float, float, float]:
    """(mean, low, high): `mbb.analysis.stats.bootstrap_ci` (the expanded percentile bootstrap
    over seeds) with the mean, as the behaviour measures' tables show it; one seed gives
    (value, -inf, inf), since one seed says nothing about spread.

    `values`: one value per seed (NaN dropped); `level`: coverage of the interval; `n_boot`:
    resamples; `seed`: of the resampling stream (fixed, so a table is reproducible)."""
    from mbb.analysis.stats import bootstrap_ci

    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return float("nan"), float("nan"), float("nan")
    ci = bootstrap_ci(x, n_resamples=n_boot, level=level, seed=seed)
    low, high = ci if ci is not None else (float("-inf"), float("inf"))
    return float(x.mean()), low, high


def paired_seed_difference(
    treated: pl.DataFrame,
    base: pl.DataFrame,
    value: str,
    by: Sequence[str] = (),
    *,
    level: float = 0.95,
) -> pl.DataFrame:
    """Treated minus base, paired by seed: per group of `by`, the seeds present in both (n),
    each side's mean, the mean difference and its bootstrap CI over seeds.

    `treated`, `base`: per-seed tables with a `seed` column, `value` and the `by` columns (e.g.
    `transmission_rates(..., by="run_id")` of two conditions); `value`: the column compared;
    `by`: grouping columns (e.g. ["kind"]); `level`: coverage of the interval."""
    keys = ["seed", *by]
    for name, df in (("treated", treated), ("base", base)):
        missing = [c for c in (*keys, value) if c not in df.columns]
        if missing:
            raise ValueError(f"{name} table lacks column(s) {missing}")
        if df.select(keys).is_duplicated().any():
            raise ValueError(
                f"{name} table has several rows per {keys}: name the other key columns in by="
            )
    # as floats: counts come as unsigned integers, whose difference would wrap around
    j = treated.select(*keys, pl.col(value).cast(pl.Float64).alias("t")).join(
        base.select(*keys, pl.col(value).cast(pl.Float64).alias("b")), on=keys
    )
    rows = []
    groups = j.group_by(list(by), maintain_order=True) if by else [((), j)]
    for key, part in groups:
        diff = (part["t"] - part["b"]).to_numpy()
        mean, low, high = seed_bootstrap_ci(diff, level=level)
        rows.append((*key, part.height, part["t"].mean(), part["b"].mean(), mean, low, high))
    schema: dict[str, pl.DataType | type[pl.DataType]] = {
        **{c: j.schema[c] for c in by},
        "n": pl.Int64,
        "treated_mean": pl.Float64,
        "base_mean": pl.Float64,
        "difference": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def _seeded(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """run_id, seed and the persona of every worker (needs `runs`/`workers`: `with_run_info`)."""
    if "runs" not in tables or "workers" not in tables:
        raise ValueError("paired measures need `runs` and `workers` (add them: with_run_info)")
    return (
        tables["workers"]
        .select("run_id", "worker", "persona")
        .join(tables["runs"].select("run_id", "seed"), on="run_id")
    )


def treated_seats(
    treated: Mapping[str, pl.DataFrame],
    base: Mapping[str, pl.DataFrame],
    column: str,
    seat: str | None = None,
) -> pl.DataFrame:
    """Per seed of the treated runs: the worker whose starting `column` (deadline_s or budget,
    at the first subrun) differs from the base run of the same seed, with its persona (the same
    in both, or an error) and both starting values. A treated seed without a base run (not run,
    or left out as invalid) keeps its row, with nulls and a `note` saying so: a seed is never
    dropped without a word.

    `treated`, `base`: tables of the two conditions (with `with_run_info`); `column`:
    subrun_workers column that the treatment changes; `seat`: the worker to compare when the
    treatment changes nothing (a null comparison), else found from the data."""

    def start(t: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
        sw = t["subrun_workers"].filter(pl.col("subrun") == pl.col("subrun").min().over("run_id"))
        return sw.select("run_id", "worker", column).join(_seeded(t), on=["run_id", "worker"])

    j = start(treated).join(start(base), on=["seed", "worker"], suffix="_base")
    clash = j.filter(pl.col("persona") != pl.col("persona_base"))
    if clash.height:
        r = clash.row(0, named=True)
        raise ValueError(
            f"seed {r['seed']}: {r['worker']} is {r['persona']} in the treated run but "
            f"{r['persona_base']} in the base run (the two conditions seat personas differently)"
        )
    picked = (
        j.filter(pl.col("worker") == seat)
        if seat is not None
        else j.filter(pl.col(column) != pl.col(f"{column}_base"))
    )
    if picked.height == 0:
        raise ValueError(
            f"no worker starts with a different {column} than in the paired base run"
            + ("" if seat is None else f" and no worker {seat!r}")
            + "; name the seat to compare (seat=...)"
        )
    paired = picked.select(
        "seed",
        "worker",
        "persona",
        pl.col("run_id"),
        pl.col("run_id_base"),
        pl.col(column).alias(f"treated_{column}"),
        pl.col(f"{column}_base").alias(f"base_{column}"),
        pl.lit(None, dtype=pl.String).alias("note"),
    )
    base_seeds = set(start(base)["seed"].to_list())
    alone = (
        start(treated)
        .select("seed", "run_id")
        .unique()
        .join(paired.select("seed"), on="seed", how="anti")
        .with_columns(
            pl.when(pl.col("seed").is_in(list(base_seeds)))
            .then(pl.lit(f"no worker starts with a different {column} than in the base run"))
            .otherwise(pl.lit("no base run of this seed"))
            .alias("note")
        )
    )
    return pl.concat([paired, alone], how="diagonal_relaxed").sort("seed", "worker")


def _normalized_bids(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Per worker-round: the declared bid (before revisions) as a multiple of the per-subrun
    share of the worker's balance at the round (bid x subruns left / balance), so budgets that
    drift apart across runs or subruns do not read as a change of strategy; with the round's
    clock `t`, the worker's deadline and its remaining modeled work at the round. A round where
    the worker has no credits left has no share to bid from and is left out (mbb's choice)."""
    d = (
        tables["declarations"]
        .sort("seq")
        .group_by(WR)
        .agg(pl.col("bid").first(), pl.col("t").first())
    )
    sw = tables["subrun_workers"].select(
        "run_id", "subrun", "worker", "budget", "deadline_s", "work_s"
    )
    last = tables["rounds"].group_by("run_id").agg(pl.col("subrun").max().alias("subruns"))
    pay = tables["payments"].group_by(WR).agg(pl.col("amount").sum())
    paid_before = (
        d.select(WR)
        .join(pay.rename({"round": "pr"}), on=["run_id", "subrun", "worker"], how="left")
        .filter(pl.col("pr").is_null() | (pl.col("pr") < pl.col("round")))
        .group_by(WR)
        .agg(pl.col("amount").sum().alias("paid_before"))
    )
    w = tables["windows"]
    prog = (
        w.filter(pl.col("status") == "ran")
        .select("run_id", "subrun", "worker", pl.col("end").alias("t_end"), "progress")
        .sort("t_end")
    )
    out = (
        d.join(sw, on=["run_id", "subrun", "worker"])
        .join(last, on="run_id")
        .join(paid_before, on=WR, how="left")
        .with_columns((pl.col("budget") - pl.col("paid_before").fill_null(0)).alias("balance"))
        .sort("t")
        .join_asof(
            prog,
            left_on="t",
            right_on="t_end",
            by=["run_id", "subrun", "worker"],
            strategy="backward",
            check_sortedness=False,  # both sides are sorted by time, so within every group too
        )
        .with_columns(pl.col("progress").fill_null(0.0))
    )
    return out.filter(pl.col("balance") > 0).with_columns(
        (pl.col("bid") * (pl.col("subruns") - pl.col("subrun") + 1) / pl.col("balance")).alias(
            "norm_bid"
        ),
        (
            pl.col("work_s")
            * (1.0 - pl.col("progress"))
            / (pl.col("deadline_s") - pl.col("t")).clip(lower_bound=1.0)
        ).alias("urgency"),
    )


def urgency_premium_paired(
    treated: Mapping[str, pl.DataFrame],
    base: Mapping[str, pl.DataFrame],
    seat: str | None = None,
) -> pl.DataFrame:
    """Urgency premium (Fig. 9 / Table 4), paired: per seed, the urgent seat's opening bid of
    each subrun (round 1, clock 0, before any revision) against the same seat and persona in
    the base run of the same seed. Bids are normalized by the balance (`_normalized_bids`), so
    credits left over from an earlier subrun do not count as a premium. `log_ratio` =
    log(treated mean / base mean) over the subruns: > 0 is a premium. mbb's choice: the paper
    compares the urgent worker with the others of its run, which mixes in its persona. Every
    treated seed has a row; where there is no ratio (no base run of the seed, an opening bid
    of 0 on either side) `log_ratio` is null and `note` says why.

    `treated`, `base`: tables (with `with_run_info`) of the deadline-asymmetric and the base
    condition; `seat`: the worker to compare (default: the one whose deadline differs)."""
    seats = treated_seats(treated, base, "deadline_s", seat)

    def opening(t: Mapping[str, pl.DataFrame], run_col: str) -> pl.DataFrame:
        nb = _normalized_bids(t).filter(pl.col("round") == 1)
        return (
            seats.select("seed", "worker", pl.col(run_col).alias("run_id"))
            .join(nb, on=["run_id", "worker"])
            .group_by("seed", "worker")
            .agg(pl.col("norm_bid").mean(), pl.len().alias("subruns"))
        )

    a = opening(treated, "run_id")
    b = opening(base, "run_id_base")
    t, bb = pl.col("treated_bid"), pl.col("base_bid")
    return (
        seats.select("seed", "worker", "persona", "note")
        .join(a.rename({"norm_bid": "treated_bid"}), on=["seed", "worker"], how="left")
        .join(
            b.rename({"norm_bid": "base_bid", "subruns": "base_subruns"}),
            on=["seed", "worker"],
            how="left",
        )
        .with_columns(
            pl.when((t > 0) & (bb > 0)).then((t / bb).log()).alias("log_ratio"),
            pl.coalesce(
                "note",
                pl.when(t.is_null())
                .then(pl.lit("no opening bid in the treated run"))
                .when(bb.is_null())
                .then(pl.lit("no opening bid in the base run"))
                .when(t <= 0)
                .then(pl.lit("opened at 0 in the treated run: no log ratio"))
                .when(bb <= 0)
                .then(pl.lit("opened at 0 in the base run: no log ratio")),
            ).alias("note"),
        )
        .drop("base_subruns")
        .sort("seed")
    )


def termination_discount(
    tables: Mapping[str, pl.DataFrame], *, by: By = "condition"
) -> pl.DataFrame:
    """Termination discount: how a worker bids once its task can no longer finish before its
    deadline, against its own bids while it still can. A worker-round counts as lost when the
    remaining modeled work exceeds the time left (work x (1 - progress) > deadline - clock);
    this under-states the need (efficiency and set-up are not visible), so every round called
    lost is lost. `log_ratio` = mean over workers of log(mean normalized bid when lost / when
    not), for `workers` with both kinds of rounds (`lost_rounds`: their lost rounds): < 0 is a
    discount. mbb's choice of estimate; the paper reads the discount off the urgent worker's
    later bids (`urgency_premium`'s later subruns). A worker whose mean bid is 0 on a side has
    no log ratio: it is counted apart, in `workers_zero_when_lost` (a total discount) or
    `workers_zero_when_open`, never dropped without a word (`log_ratio` is null where no
    worker has one). Rounds where a worker has no credits left are not bids (its balance is
    0): `_normalized_bids` leaves them out.

    `tables`: one or more conditions' tables (with `with_run_info`); `by`: "condition" for the
    workers of the condition's runs pooled, "run_id" for one row per run with a worker to
    compare (the seed is the unit of a CI)."""
    keys = by_keys(
        by, "termination_discount", pooled=["condition"], per_run=["condition", "seed", "run_id"]
    )
    nb = _normalized_bids(tables).with_columns((pl.col("urgency") > 1.0).alias("lost"))
    lost, open_ = pl.col("lost_bid"), pl.col("open_bid")
    per_worker = (
        nb.group_by("run_id", "worker")
        .agg(
            lost=pl.col("norm_bid").filter(pl.col("lost")).mean(),
            open=pl.col("norm_bid").filter(~pl.col("lost")).mean(),
            lost_rounds=pl.col("lost").sum(),
        )
        .rename({"lost": "lost_bid", "open": "open_bid"})
        .filter(lost.is_not_null() & open_.is_not_null())  # both kinds of round
        .with_columns(
            pl.when((lost > 0) & (open_ > 0)).then((lost / open_).log()).alias("log_ratio")
        )
    )
    runs = run_seeds(tables, per_worker.select("run_id").unique())
    has_ratio = pl.col("log_ratio").is_not_null()
    return (
        per_worker.join(runs, on="run_id")
        .group_by(keys)
        .agg(
            has_ratio.sum().cast(pl.UInt32).alias("workers"),
            pl.col("lost_rounds").filter(has_ratio).sum(),
            pl.col("log_ratio").mean(),
            ((lost == 0) & (open_ > 0)).sum().cast(pl.UInt32).alias("workers_zero_when_lost"),
            (open_ == 0).sum().cast(pl.UInt32).alias("workers_zero_when_open"),
        )
        .sort(keys[:2])
    )


def rich_worker_paired(
    treated: Mapping[str, pl.DataFrame],
    base: Mapping[str, pl.DataFrame],
    seat: str | None = None,
) -> pl.DataFrame:
    """Rich worker (Table 5), paired: per seed, the seat that starts with more credits against
    the same seat and persona in the base run of the same seed — credits spent, wins (first
    place in a contested round's schedule) and win rate over contested rounds, whole run.
    `win_rate_diff` and `spent_diff` are treated minus base. mbb's choice: the paper compares
    the rich worker with the others of its run, which mixes in its persona. Every treated seed
    has a row; a value that cannot be computed (no base run of the seed, no contested round on
    a side) is null and `note` says why.

    `treated`, `base`: tables (with `with_run_info`) of the budget-asymmetric and the base
    condition; `seat`: the worker to compare (default: the one whose budget differs)."""
    seats = treated_seats(treated, base, "budget", seat)

    def side(t: Mapping[str, pl.DataFrame], run_col: str) -> pl.DataFrame:
        sel = seats.filter(pl.col(run_col).is_not_null()).select(
            "seed", "worker", pl.col(run_col).alias("run_id")
        )
        w = (
            _wins(t)
            .filter(pl.col("contested"))
            .join(sel, on=["run_id", "worker"])
            .group_by("seed", "worker")
            .agg(pl.col("won").sum().alias("wins"), pl.col("won").mean().alias("win_rate"))
        )
        pay = (
            t["payments"]
            .join(sel, on=["run_id", "worker"])
            .group_by("seed", "worker")
            .agg(pl.col("amount").sum().alias("spent"))
        )
        # every seat of a run: one that paid nothing spent 0; one never contested has no rate
        return (
            sel.drop("run_id")
            .join(w, on=["seed", "worker"], how="left")
            .join(pay, on=["seed", "worker"], how="left")
            .with_columns(pl.col("wins").fill_null(0), pl.col("spent").fill_null(0))
        )

    a = side(treated, "run_id")
    b = side(base, "run_id_base")
    return (
        seats.select("seed", "worker", "persona", "note")
        .join(a, on=["seed", "worker"], how="left")
        .join(b, on=["seed", "worker"], how="left", suffix="_base")
        .with_columns(
            (pl.col("win_rate") - pl.col("win_rate_base")).alias("win_rate_diff"),
            (pl.col("spent") - pl.col("spent_base")).alias("spent_diff"),
            pl.coalesce(
                "note",
                pl.when(pl.col("win_rate").is_null())
                .then(pl.lit("no contested round in the treated run: no win rate"))
                .when(pl.col("win_rate_base").is_null())
                .then(pl.lit("no contested round in the base run: no win rate")),
            ).alias("note"),
        )
        .sort("seed")
    )

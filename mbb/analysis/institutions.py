"""Institutions: behaviours that are self-discovered and forward-scoped (SCARCE §4.3).

- self-discovered: not mandated. For LLM workers the prompt mandates price-primary ranking
  (the ballot instructions order by declared bid). For scripted workers a category is mandated
  when the persona's definition dictates it: `PERSONA_MANDATES` lists, per persona, what its
  strategy (mbb/agents/personas.py, the table in its module docstring) is written to do.
  What a scripted worker does beyond that arises from interaction (e.g. a price-first worker
  that accepted a reciprocal offer and later honours it) and counts as self-discovered.
- forward-scoped: the worker exhibits the category in at least two distinct rounds, so it
  persists or is invoked later (`cross_subrun` when the rounds span subruns).
- relational (†) vs non-relational (‡) from the taxonomy marker; unmarked categories are never
  institutions.
Per pair: relational categories voiced in private messages to the same peer in two or more
rounds.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from mbb.analysis._frames import condition_of, labels_of
from mbb.taxonomy import CATEGORIES

__all__ = [
    "LLM_MANDATES",
    "PERSONA_MANDATES",
    "institution_summary",
    "institutions",
    "pair_institutions",
]

# price-primary is the operator's mechanism and the prompt's instruction: mandated for everyone
LLM_MANDATES: frozenset[str] = frozenset({"price_primary"})
PERSONA_MANDATES: dict[str, frozenset[str]] = {
    # bids high and anchors, ranks by bid, argues talk is cheap, raises bids to stay ahead
    "price_first": frozenset({"price_primary", "anchoring", "cheap_talk", "iterative_bargaining"}),
    # discloses deadlines, proposes and ranks EDF, ultimatums when tight, argues margins
    "deadline_advocate": frozenset(
        {
            "price_primary",
            "earliest_deadline_first",
            "rule_making_citation",
            "deadline_ultimatum",
            "risk_variance",
        }
    ),
    # offers concessions for later favours, calls them in, cites its record, defers on ties
    "reciprocator": frozenset(
        {"price_primary", "reciprocity", "reputation", "tie_break_deference"}
    ),
    # invites a bloc, targets a rival, appeals to the majority, keeps the bloc
    "coalition_builder": frozenset(
        {
            "price_primary",
            "coalition_formation",
            "coalition_loyalty",
            "rival_targeting",
            "social_proof",
        }
    ),
    # proposes and ranks SJF, argues its step gates later work
    "shortest_job_advocate": frozenset(
        {"price_primary", "shortest_job_first", "rule_making_citation", "downstream_gating"}
    ),
    # steps aside when infeasible, ranks itself last
    "quitter": frozenset({"price_primary", "scope_reduction", "welfare_concession"}),
    # proposes and cites one standing rule (price/shorter, arrival order, tie by queue)
    "rule_maker": frozenset(
        {"price_primary", "rule_making_citation", "recency_first", "tie_break_deference"}
    ),
}

_MARKERS = pl.DataFrame(
    {
        "category": [c.name for c in CATEGORIES],
        "marker": [c.marker for c in CATEGORIES],
        "family": [c.family for c in CATEGORIES],
    }
)


def _mandates_frame() -> pl.DataFrame:
    rows = [(p, c) for p, cats in PERSONA_MANDATES.items() for c in sorted(cats)]
    return pl.DataFrame(rows, schema=["persona", "category"], orient="row").with_columns(
        pl.lit(True).alias("mandated")
    )


def _mandated(df: pl.DataFrame, tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    if "workers" in tables:
        w = tables["workers"].select("run_id", "worker", "persona", "negotiator")
    else:
        w = (
            df.select("run_id", "worker")
            .unique()
            .with_columns(
                pl.lit(None, pl.String).alias("persona"), pl.lit("scripted").alias("negotiator")
            )
        )
    df = df.join(w, on=["run_id", "worker"], how="left")
    df = df.join(_mandates_frame(), on=["persona", "category"], how="left")
    # an LLM negotiator's persona field is unused: only the prompt's mandates apply to it
    is_llm = pl.col("negotiator") == "llm"
    persona = pl.col("mandated").fill_null(False) & ~is_llm
    prompt = pl.col("category").is_in(list(LLM_MANDATES)) | (pl.col("category") == "price_primary")
    return df.with_columns((persona | prompt).alias("mandated"))


def institutions(tables: Mapping[str, pl.DataFrame], wr_pred: pl.DataFrame) -> pl.DataFrame:
    """Per (run, worker, category): rounds and subruns exhibited, mandated, forward-scoped,
    marker, and `institutional` (= marked, self-discovered and forward-scoped)."""
    g = wr_pred.group_by("run_id", "worker", "category").agg(
        pl.struct("subrun", "round").n_unique().alias("rounds"),
        pl.col("subrun").n_unique().alias("subruns"),
        pl.col("subrun").min().alias("first_subrun"),
    )
    g = _mandated(g, tables).join(_MARKERS, on="category", how="left")
    g = g.with_columns(
        (pl.col("rounds") >= 2).alias("forward_scoped"),
        (pl.col("subruns") >= 2).alias("cross_subrun"),
    ).with_columns(
        ((pl.col("marker") != "none") & ~pl.col("mandated") & pl.col("forward_scoped")).alias(
            "institutional"
        )
    )
    g = labels_of(condition_of(g, tables), tables)
    return g.select(
        "condition",
        "run_id",
        "worker",
        "model",
        "persona",
        "category",
        "family",
        "marker",
        "rounds",
        "subruns",
        "first_subrun",
        "mandated",
        "forward_scoped",
        "cross_subrun",
        "institutional",
    ).sort("run_id", "worker", "category")


def pair_institutions(tables: Mapping[str, pl.DataFrame], evidence: pl.DataFrame) -> pl.DataFrame:
    """Per (run, worker, peer, category) for relational categories in private messages."""
    rel = [c.name for c in CATEGORIES if c.marker == "relational"]
    msgs = (
        tables["messages"]
        .filter(pl.col("to").is_not_null())
        .select("run_id", "seq", pl.col("to").alias("peer"))
    )
    e = evidence.filter(pl.col("category").is_in(rel)).join(msgs, on=["run_id", "seq"])
    g = e.group_by("run_id", "worker", "peer", "category").agg(
        pl.struct("subrun", "round").n_unique().alias("rounds"),
        pl.col("subrun").n_unique().alias("subruns"),
    )
    g = (
        _mandated(g, tables)
        .with_columns(
            (pl.col("rounds") >= 2).alias("forward_scoped"),
            (pl.col("subruns") >= 2).alias("cross_subrun"),
        )
        .with_columns((~pl.col("mandated") & pl.col("forward_scoped")).alias("institutional"))
    )
    return condition_of(g, tables).sort("run_id", "worker", "peer", "category")


def institution_summary(inst: pl.DataFrame) -> pl.DataFrame:
    """Share of (run, worker) with at least one relational / non-relational institution, by
    condition and model."""
    w = inst.group_by("condition", "model", "run_id", "worker").agg(
        (pl.col("institutional") & (pl.col("marker") == "relational")).any().alias("relational"),
        (pl.col("institutional") & (pl.col("marker") == "non_relational"))
        .any()
        .alias("non_relational"),
    )
    return (
        w.group_by("condition", "model")
        .agg(
            pl.len().alias("workers"),
            pl.col("relational").mean().alias("share_relational_institution"),
            pl.col("non_relational").mean().alias("share_non_relational_institution"),
        )
        .sort("condition", "model")
    )

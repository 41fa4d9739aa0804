"""Institutions: behaviours that are self-discovered and forward-scoped (SCARCE §4.3).

- self-discovered: not mandated. A category is mandated for a worker when a rule of its run's
  condition imposes it — each registered rule declares the categories it enacts
  (`mbb.protocol.rules`, `imposes`; `mbb.protocol.explain.imposed` collects those in force,
  read per run from its recorded params by `with_run_info`: an EDF mechanism imposes EDF, a
  price-ordered aggregation price-primary, fixed bids nothing) — or, for a scripted worker,
  when its persona's code enacts it (`mbb.agents.personas.PERSONAS`, `enacts`). Nothing is
  mandated by what a classifier finds in the instructions: LLM workers read the rules and no
  strategy (`mbb.analysis.instructions.instruction_hits` audits that), so a reciprocity deal,
  a reputation claim or a tie-break an LLM worker voices is its own. What a scripted worker
  does beyond its persona arises from interaction (e.g. a price-first worker that accepted a
  reciprocal offer and later honours it) and counts as self-discovered too.
- forward-scoped: the paper's "scoped to future rounds". The worker voices the category in an
  utterance (or, given worker-round labels only, in a round) where it makes a commitment scoped
  to future rounds (`mbb.analysis.rules.forward_commitments`: "next time we meet, you go
  ahead", "for the rest of the run ties go to ..."). Recurrence alone is not scope: `persistent`
  (exhibited in two or more rounds) and `cross_subrun` (rounds in two or more subruns) are
  reported beside it. Without text tables nothing is forward-scoped.
- relational (†) vs non-relational (‡) from the taxonomy marker; unmarked categories are never
  institutions.
Per pair: relational categories voiced in private messages to the same peer, forward-scoped
when one of those messages is.

Mixed runs (`workers.overrides.<W>.negotiator`, a study's mixed roster): LLM agents there read
scripted personas' messages, which model institutions ("Highest bid should run first") and
some of which act on the true remaining work. Every table here carries `mixed_negotiators` (the
run has both LLM and scripted negotiators; `negotiator_mix`) and names the scripted seats; the
summaries add `MIXED_NOTE`: institutions in such runs are not evidence of emergence among LLM
agents. The flag is read from `run_started` (each worker's `negotiator`, the `workers` table).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache

import polars as pl

from mbb.agents.personas import PERSONAS
from mbb.analysis._frames import By, by_keys, condition_of, labels_of
from mbb.analysis.rules import forward_commitments
from mbb.core.taxonomy import CATEGORIES

__all__ = [
    "MIXED_NOTE",
    "default_imposed",
    "institution_summary",
    "institutions",
    "negotiator_mix",
    "pair_institution_summary",
    "pair_institutions",
]


@cache
def default_imposed() -> frozenset[str]:
    """What the rules of a default condition impose (nothing: Kemeny ballots, pay your bid,
    revisable bids): the mandate of a run whose params are not at hand (no `runs` table)."""
    from mbb.params import Condition
    from mbb.protocol.explain import imposed

    return imposed(Condition.model_validate({}))


_MARKERS = pl.DataFrame(
    {
        "category": [c.name for c in CATEGORIES],
        "marker": [c.marker for c in CATEGORIES],
        "family": [c.family for c in CATEGORIES],
    }
)


MIXED_NOTE = (
    "mixed negotiators: scripted personas' messages model institutions and some act on true "
    "remaining work, so institutions in this run are not evidence of emergence among LLM agents"
)
_MIX = ["mixed_negotiators", "scripted_seats"]


def negotiator_mix(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Per run: `mixed_negotiators` (both LLM and scripted negotiators sat in it) and
    `scripted_seats` ("W2 (deadline_advocate), ...", null unless mixed), from the `workers`
    table (`run_started`); without one no run is known to be mixed (no rows)."""
    schema = {"run_id": pl.String, "mixed_negotiators": pl.Boolean, "scripted_seats": pl.String}
    if "workers" not in tables:
        return pl.DataFrame(schema=schema)
    w = tables["workers"]
    llm = pl.col("negotiator").fill_null("scripted") == "llm"
    seat = pl.format("{} ({})", "worker", pl.col("persona").fill_null("?"))
    per = w.group_by("run_id", maintain_order=True).agg(
        (llm.any() & (~llm).any()).alias("mixed_negotiators"),
        seat.filter(~llm).str.join(", ").alias("scripted_seats"),
    )
    seats = pl.when("mixed_negotiators").then("scripted_seats")
    return per.with_columns(seats.alias("scripted_seats")).select(list(schema))


def _with_mix(df: pl.DataFrame, tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    df = df.join(negotiator_mix(tables), on="run_id", how="left")
    return df.with_columns(pl.col("mixed_negotiators").fill_null(False))


def _note(df: pl.DataFrame) -> pl.DataFrame:
    """`note`: `MIXED_NOTE` on a row of (or pooling) a mixed run, else null."""
    return df.with_columns(
        pl.when("mixed_negotiators").then(pl.lit(MIXED_NOTE)).otherwise(None).alias("note")
    )


def _mixes(inst: pl.DataFrame) -> pl.DataFrame:
    """Per run of rows from `institutions`/`pair_institutions`: its mix (not mixed when the
    rows predate the flag)."""
    if "mixed_negotiators" not in inst.columns:
        return (
            inst.select("run_id")
            .unique()
            .with_columns(
                pl.lit(False).alias("mixed_negotiators"),
                pl.lit(None, pl.String).alias("scripted_seats"),
            )
        )
    return inst.group_by("run_id").agg(pl.col(_MIX).first())


def _mandates_frame() -> pl.DataFrame:
    rows = [(p.name, c) for p in PERSONAS for c in sorted(p.enacts)]
    return pl.DataFrame(rows, schema=["persona", "category"], orient="row").with_columns(
        pl.lit(True).alias("mandated")
    )


def _mandated(
    df: pl.DataFrame,
    tables: Mapping[str, pl.DataFrame],
    imposed: Mapping[str, Iterable[str]] | None,
) -> pl.DataFrame:
    """Add `mandated`: the category is imposed by the rules of the run's condition, or the
    worker is scripted and its persona enacts it (see the module docstring)."""
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
    runs = df.select("run_id").unique()
    if imposed is not None:  # per condition name, given
        cond = condition_of(runs, tables)
        rows = [
            (c, cat)
            for c in cond["condition"].unique().to_list()
            for cat in sorted(set(imposed.get(c, default_imposed())))
        ]
        by_run = (
            pl.DataFrame(rows, schema=["condition", "category"], orient="row")
            .join(cond, on="condition")
            .select("run_id", "category")
        )
    elif "runs" in tables and "imposed" in tables["runs"].columns:  # from the recorded params
        by_run = (
            tables["runs"]
            .select("run_id", pl.col("imposed").alias("category"))
            .explode("category")
            .drop_nulls("category")
        )
    else:
        by_run = runs.join(
            pl.DataFrame({"category": sorted(default_imposed())}, schema={"category": pl.String}),
            how="cross",
        )
    by_run = by_run.unique().with_columns(pl.lit(True).alias("imposed"))
    df = df.join(by_run, on=["run_id", "category"], how="left")
    persona = pl.col("mandated").fill_null(False) & (pl.col("negotiator") != "llm")
    rule = pl.col("imposed").fill_null(False)
    return df.with_columns((persona | rule).alias("mandated")).drop("imposed")


def _forward(tables: Mapping[str, pl.DataFrame], by_seq: bool) -> pl.DataFrame:
    """Keys (run, seq) or (run, subrun, round, worker) with a forward-scoped commitment."""
    keys = ["run_id", "seq"] if by_seq else ["run_id", "subrun", "round", "worker"]
    if not all(t in tables for t in ("declarations", "messages", "ballots")):
        return pl.DataFrame(
            schema={k: pl.Int64 if k in ("seq", "subrun", "round") else pl.String for k in keys}
        ).with_columns(pl.lit(True).alias("fwd"))
    return forward_commitments(tables).select(keys).unique().with_columns(pl.lit(True).alias("fwd"))


def institutions(
    tables: Mapping[str, pl.DataFrame],
    wr_pred: pl.DataFrame,
    *,
    imposed: Mapping[str, Iterable[str]] | None = None,
) -> pl.DataFrame:
    """Per (run, worker, category): rounds and subruns exhibited, mandated, forward-scoped,
    persistent, marker, and `institutional` (= marked, self-discovered and forward-scoped);
    `mixed_negotiators` and `scripted_seats`: its run's mix of negotiators (`negotiator_mix`).

    tables: the run tables (with `workers` for personas and negotiators; declarations,
    messages and ballots for forward scope). wr_pred: worker-round labels
    (`worker_round_predictions`), or utterance labels with `seq` (`utterance_predictions`),
    which tie forward scope to the very utterance. imposed: per condition name, the categories
    its rules impose, replacing what the `runs` table records (`mbb.protocol.explain.imposed`
    of each run's params; without a `runs` table, a default condition's: `default_imposed`)."""
    by_seq = "seq" in wr_pred.columns
    keys = ["run_id", "seq"] if by_seq else ["run_id", "subrun", "round", "worker"]
    fwd = wr_pred.join(_forward(tables, by_seq), on=keys, how="left").with_columns(
        pl.col("fwd").fill_null(False)
    )
    g = fwd.group_by("run_id", "worker", "category").agg(
        pl.struct("subrun", "round").n_unique().alias("rounds"),
        pl.col("subrun").n_unique().alias("subruns"),
        pl.col("subrun").min().alias("first_subrun"),
        pl.col("fwd").any().alias("forward_scoped"),
    )
    g = _mandated(g, tables, imposed).join(_MARKERS, on="category", how="left")
    g = g.with_columns(
        (pl.col("rounds") >= 2).alias("persistent"),
        (pl.col("subruns") >= 2).alias("cross_subrun"),
    ).with_columns(
        ((pl.col("marker") != "none") & ~pl.col("mandated") & pl.col("forward_scoped")).alias(
            "institutional"
        )
    )
    g = _with_mix(labels_of(condition_of(g, tables), tables), tables)
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
        "persistent",
        "cross_subrun",
        "institutional",
        *_MIX,
    ).sort("run_id", "worker", "category")


def pair_institutions(
    tables: Mapping[str, pl.DataFrame],
    evidence: pl.DataFrame,
    *,
    imposed: Mapping[str, Iterable[str]] | None = None,
) -> pl.DataFrame:
    """Per (run, worker, peer, category) for relational categories in private messages:
    rounds, forward-scoped (one of the messages commits to future rounds), persistent,
    mandated, institutional. tables, imposed: as in `institutions`; evidence: the
    classifier's evidence rows (with `seq`). Each row carries its run's `mixed_negotiators`
    and `scripted_seats` (`negotiator_mix`)."""
    rel = [c.name for c in CATEGORIES if c.marker == "relational"]
    msgs = (
        tables["messages"]
        .filter(pl.col("to").is_not_null())
        .select("run_id", "seq", pl.col("to").alias("peer"))
    )
    e = (
        evidence.filter(pl.col("category").is_in(rel))
        .join(msgs, on=["run_id", "seq"])
        .join(_forward(tables, True), on=["run_id", "seq"], how="left")
        .with_columns(pl.col("fwd").fill_null(False))
    )
    g = e.group_by("run_id", "worker", "peer", "category").agg(
        pl.struct("subrun", "round").n_unique().alias("rounds"),
        pl.col("subrun").n_unique().alias("subruns"),
        pl.col("fwd").any().alias("forward_scoped"),
    )
    g = (
        _mandated(g, tables, imposed)
        .with_columns(
            (pl.col("rounds") >= 2).alias("persistent"),
            (pl.col("subruns") >= 2).alias("cross_subrun"),
        )
        .with_columns((~pl.col("mandated") & pl.col("forward_scoped")).alias("institutional"))
    )
    return _with_mix(condition_of(g, tables), tables).sort("run_id", "worker", "peer", "category")


def _worker_institutions(inst: pl.DataFrame) -> pl.DataFrame:
    """Per (condition, model, run, worker): whether it has at least one relational and one
    non-relational institution, the unit of `institution_summary` pooled or per run."""
    return inst.group_by("condition", "model", "run_id", "worker").agg(
        (pl.col("institutional") & (pl.col("marker") == "relational")).any().alias("relational"),
        (pl.col("institutional") & (pl.col("marker") == "non_relational"))
        .any()
        .alias("non_relational"),
    )


# over the workers of `_worker_institutions`: how many, and the shares with an institution
_SHARES = (
    pl.len().alias("workers"),
    pl.col("relational").mean().alias("share_relational_institution"),
    pl.col("non_relational").mean().alias("share_non_relational_institution"),
)


def institution_summary(inst: pl.DataFrame, *, by: By = "condition") -> pl.DataFrame:
    """The share of (run, worker) with at least one relational / non-relational institution,
    of the `workers` that exhibit a category.

    by="condition": per condition and model. by="run_id": per (condition, run) with every
    model pooled (the seed is the unit of a CI), and `self_discovered_share` = of the run's
    forward-scoped relational (worker, category) rows (`forward_relational`), the share not
    mandated (the self-discovered split; null when the run has none), mbb's choice of a
    per-run form of the split.

    Both carry `mixed_negotiators` (a run of the group had LLM and scripted negotiators;
    per run also `scripted_seats`) and `note` (`MIXED_NOTE` where mixed, else null).

    inst: the rows of `institutions` (one or more conditions); by: as above."""
    keys = by_keys(by, "institution_summary", ["condition", "model"], ["condition", "run_id"])
    w = _worker_institutions(inst).join(_mixes(inst), on="run_id", how="left")
    if by == "condition":
        mix = pl.col("mixed_negotiators").fill_null(False).any()
        return _note(w.group_by(keys).agg(*_SHARES, mix).sort(keys))
    per = w.group_by(keys).agg(*_SHARES, pl.col(_MIX).first())
    rel = pl.col("marker") == "relational"
    fwd = (
        inst.filter(rel & pl.col("forward_scoped"))
        .group_by("run_id")
        .agg(
            pl.len().alias("forward_relational"),
            (~pl.col("mandated")).mean().alias("self_discovered_share"),
        )
    )
    return _note(
        per.join(fwd, on="run_id", how="left")
        .with_columns(pl.col("forward_relational").fill_null(0).cast(pl.Int64))
        .sort(keys)
        .select(pl.exclude(_MIX), *_MIX)
    )


def pair_institution_summary(pairs: pl.DataFrame, *, by: By = "condition") -> pl.DataFrame:
    """The relational (worker, peer, category) rows voiced in private (`pairs`), how many are
    forward-scoped and institutional, and `institutional_share` = institutional / rows (mbb's
    choice of a summary; a group without private relational messages has no row).

    pairs: the rows of `pair_institutions` (one or more conditions); by: "condition" per
    condition, "run_id" per (condition, run), for a CI over seeds. Like `institution_summary`
    it carries `mixed_negotiators` (per run with `scripted_seats`) and `note`."""
    keys = by_keys(by, "pair_institution_summary", ["condition"], ["condition", "run_id"])
    p = pairs.drop(_MIX, strict=False).join(_mixes(pairs), on="run_id", how="left")
    mix = [pl.col("mixed_negotiators").fill_null(False).any()]
    if by == "run_id":
        mix = [pl.col(c).first() for c in _MIX]
    return _note(
        p.group_by(keys)
        .agg(
            pl.len().alias("pairs"),
            pl.col("forward_scoped").sum().alias("forward_scoped"),
            pl.col("institutional").sum().alias("institutional"),
            pl.col("institutional").mean().alias("institutional_share"),
            *mix,
        )
        .sort(keys)
    )

"""Transmission: how rules and commitments travel — proposed, accepted, cited, honoured or
broken — across rounds and, through scratch memory, across subruns.

Everything is read from the transcript (text, `to`, ballots, scratch text); scripted intents are
used only by `validate_commitment_acts`, as ground truth for the text extraction.

- Commitments (reciprocity debts): A offers B a concession now for a favour later (private
  message); B accepts; A later calls it in (a claim = a citation); B honours it when, in a later
  round where both are candidates, B's ballot ranks A above itself; it is broken when B had such
  rounds and never did; open otherwise.
- Rules: any allocation rule stated in text (`mbb.analysis.rules.rule_statements`: a known
  convention or one an agent invents), a rule being a cluster of statements within a run; every
  later note, message or ballot that states or cites it again is a citation; it is accepted
  when someone other than the proposer states it, or follows it in a ballot where the rule is
  a plain ordering the ballots can be checked against (SJF, EDF); see `rule_lifecycle`.
- Coalitions: a bloc invitation; later loyalty messages by the founder cite it.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from mbb.analysis._frames import By, by_keys
from mbb.analysis.evidence import round_orders
from mbb.analysis.rules import rule_signature, rule_statements

__all__ = [
    "coalitions",
    "commitment_acts",
    "commitments",
    "honour_rate",
    "rule_lifecycle",
    "transmission_rates",
    "validate_commitment_acts",
]

# Commitment acts (offer / accept / claim) are parsed from private messages with this narrow
# pattern of explicit favour-trading wording; it is a parser for commitment bookkeeping, not the
# taxonomy classifier (which labels reciprocity through `mbb.analysis.textclf`).
RECIP = (
    r"(?i)(?:return the favou?r|\bowes? (?:me|you)\b|you owe|in return|favou?r (?:later|back)"
    r"|calling in a favou?r|next time we meet|in a later round|a simple exchange|as offered"
    r"|as I promised|back me ahead|rank me above you|I'?ll back you above me"
    r"|you go first now|I'?ll owe you)"
)
OFFER = r"(?i)\b(?:next|later|in return)\b"
ACCEPT = r"(?i)^\s*(?:accepted|deal|agreed)\b"
CLAIM = r"(?i)owe me|return the favou?r|\bcollect\b|you owe"
HONOUR_TEXT = r"(?i)as I promised|honou?ring what I owe"
_RK = pl.col("subrun") * 100_000 + pl.col("round")  # sortable (subrun, round)


def _global_round(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Index of each (subrun, round) within its run, counting across subruns (1-based)."""
    return (
        tables["rounds"]
        .select("run_id", "subrun", "round")
        .unique()
        .sort("run_id", "subrun", "round")
        .with_columns(pl.int_range(1, pl.len() + 1).over("run_id").alias("g"))
    )


def commitment_acts(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Private messages classified as offer / accept / claim (text only)."""
    m = tables["messages"].filter(pl.col("to").is_not_null())
    t = pl.col("text")
    recip = t.str.contains(RECIP)
    act = (
        pl.when(recip & t.str.contains(ACCEPT))
        .then(pl.lit("accept"))
        .when(recip & t.str.contains(CLAIM))
        .then(pl.lit("claim"))
        .when(recip & t.str.contains(OFFER))
        .then(pl.lit("offer"))
    )
    return (
        m.with_columns(act.alias("act"))
        .drop_nulls("act")
        .select("run_id", "seq", "subrun", "round", "turn", "worker", "to", "act")
    )


def validate_commitment_acts(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Text-extracted acts vs scripted intents (offer_concession/accept_offer/claim_debt)."""
    kinds = {"offer_concession": "offer", "accept_offer": "accept", "claim_debt": "claim"}
    truth = (
        tables["messages"]
        .select("run_id", "seq", "intents")
        .explode("intents")
        .drop_nulls("intents")
        .with_columns(pl.col("intents").struct.field("kind").alias("k"))
        .filter(pl.col("k").is_in(list(kinds)))
        .select("run_id", "seq", pl.col("k").replace_strict(kinds).alias("act"))
        .unique()
        .with_columns(pl.lit(True).alias("t"))
    )
    pred = (
        commitment_acts(tables).select("run_id", "seq", "act").with_columns(pl.lit(True).alias("p"))
    )
    j = truth.join(pred, on=["run_id", "seq", "act"], how="full", coalesce=True)
    return (
        j.group_by("act")
        .agg(
            pl.col("t").is_not_null().sum().alias("support"),
            pl.col("p").is_not_null().sum().alias("extracted"),
            (pl.col("t").is_not_null() & pl.col("p").is_not_null()).sum().alias("tp"),
        )
        .with_columns(
            (pl.col("tp") / pl.col("extracted")).alias("precision"),
            (pl.col("tp") / pl.col("support")).alias("recall"),
        )
        .sort("act")
    )


def commitments(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per offered commitment: who owes whom, and its lifecycle.

    Columns: creditor (offered the concession), debtor, origin subrun/round, accepted,
    first claim (citation), honoured (and where), status honoured | broken | open,
    later_subrun (cited or honoured in a later subrun), in_scratch (the debt is written to
    either party's scratch at the end of the origin subrun).
    """
    acts = commitment_acts(tables)
    offers = acts.filter(pl.col("act") == "offer").select(
        "run_id",
        pl.col("worker").alias("creditor"),
        pl.col("to").alias("debtor"),
        "subrun",
        "round",
        pl.col("seq").alias("offer_seq"),
    )
    accepts = acts.filter(pl.col("act") == "accept").select(
        "run_id",
        "subrun",
        "round",
        pl.col("worker").alias("debtor"),
        pl.col("to").alias("creditor"),
        pl.col("seq").alias("accept_seq"),
    )
    c = offers.join(accepts, on=["run_id", "subrun", "round", "creditor", "debtor"], how="left")
    c = c.with_columns(
        (pl.col("accept_seq").is_not_null() & (pl.col("accept_seq") > pl.col("offer_seq"))).alias(
            "accepted"
        )
    ).unique(["run_id", "offer_seq"], keep="first")
    # the next offer between the same pair bounds this commitment's life
    c = c.sort("run_id", "offer_seq").with_columns(
        pl.col("offer_seq").shift(-1).over("run_id", "creditor", "debtor").alias("next_offer_seq")
    )
    claims = acts.filter(pl.col("act") == "claim").select(
        "run_id",
        pl.col("worker").alias("creditor"),
        pl.col("to").alias("debtor"),
        pl.col("seq").alias("claim_seq"),
        pl.col("subrun").alias("claim_subrun"),
        pl.col("round").alias("claim_round"),
    )
    first_claim = (
        c.join(claims, on=["run_id", "creditor", "debtor"])
        .filter(
            (pl.col("claim_seq") > pl.col("offer_seq"))
            & (
                (pl.col("claim_seq") < pl.col("next_offer_seq"))
                | pl.col("next_offer_seq").is_null()
            )
        )
        .sort("claim_seq")
        .group_by("run_id", "offer_seq")
        .agg(pl.col("claim_seq", "claim_subrun", "claim_round").first())
    )
    c = c.join(first_claim, on=["run_id", "offer_seq"], how="left")
    # the debtor's later ballots in rounds where both are candidates
    b = tables["ballots"].select(
        "run_id", "seq", "subrun", "round", pl.col("worker").alias("debtor"), "ranking", "reasoning"
    )
    later = (
        c.select(
            "run_id",
            "offer_seq",
            "creditor",
            "debtor",
            pl.col("subrun").alias("s0"),
            pl.col("round").alias("r0"),
            "next_offer_seq",
        )
        .join(b, on=["run_id", "debtor"])
        .filter(
            (pl.col("subrun") * 100_000 + pl.col("round") > pl.col("s0") * 100_000 + pl.col("r0"))
            & (pl.col("ranking").list.contains(pl.col("creditor")))
        )
    )
    later = _ahead(later)
    hon = (
        later.filter(pl.col("ahead"))
        .sort("seq")
        .group_by("run_id", "offer_seq")
        .agg(
            pl.col("subrun").first().alias("honour_subrun"),
            pl.col("round").first().alias("honour_round"),
            pl.col("reasoning").first().str.contains(HONOUR_TEXT).alias("honour_stated"),
        )
    )
    n_later = later.group_by("run_id", "offer_seq").agg(pl.len().alias("later_rounds_together"))
    c = (
        c.join(hon, on=["run_id", "offer_seq"], how="left")
        .join(n_later, on=["run_id", "offer_seq"], how="left")
        .with_columns(pl.col("later_rounds_together").fill_null(0))
    )
    status = (
        pl.when(pl.col("honour_round").is_not_null())
        .then(pl.lit("honoured"))
        .when(pl.col("later_rounds_together") > 0)
        .then(pl.lit("broken"))
        .otherwise(pl.lit("open"))
    )
    scratch = _scratch_debts(tables)
    c = c.join(scratch, on=["run_id", "creditor", "debtor", "subrun"], how="left").with_columns(
        pl.col("in_scratch").fill_null(False)
    )
    g = _global_round(tables)
    c = c.join(g, on=["run_id", "subrun", "round"], how="left").join(
        g.rename({"subrun": "claim_subrun", "round": "claim_round", "g": "g_claim"}),
        on=["run_id", "claim_subrun", "claim_round"],
        how="left",
    )
    return (
        c.with_columns(
            status.alias("status"),
            (
                (pl.col("claim_subrun") > pl.col("subrun"))
                | (pl.col("honour_subrun") > pl.col("subrun"))
            )
            .fill_null(False)
            .alias("later_subrun"),
            (pl.col("g_claim") - pl.col("g")).alias("rounds_to_first_citation"),
        )
        .select(
            "run_id",
            "creditor",
            "debtor",
            "subrun",
            "round",
            "offer_seq",
            "accepted",
            "claim_subrun",
            "claim_round",
            "rounds_to_first_citation",
            "honour_subrun",
            "honour_round",
            "honour_stated",
            "later_rounds_together",
            "status",
            "later_subrun",
            "in_scratch",
        )
        .sort("run_id", "offer_seq")
    )


def _ahead(df: pl.DataFrame) -> pl.DataFrame:
    """`ahead`: the creditor is ranked above the debtor in the debtor's ballot (vectorised)."""
    ex = (
        df.with_row_index("_i")
        .explode("ranking")
        .with_columns(pl.int_range(pl.len()).over("_i").alias("_p"))
    )
    pc = ex.filter(pl.col("ranking") == pl.col("creditor")).select("_i", pl.col("_p").alias("pc"))
    pd = ex.filter(pl.col("ranking") == pl.col("debtor")).select("_i", pl.col("_p").alias("pd"))
    out = df.with_row_index("_i").join(pc, on="_i", how="left").join(pd, on="_i", how="left")
    return out.with_columns(
        (pl.col("pc") < pl.col("pd").fill_null(10**9)).fill_null(False).alias("ahead")
    ).drop("_i", "pc", "pd")


def _scratch_debts(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Debts written to scratch: lines naming '<debtor> owes <creditor>' at the end of a subrun."""
    s = tables["scratch"].with_columns(
        pl.col("text").str.extract_groups(r"(\S+) owes (\S+)").alias("g")
    )
    return (
        s.filter(pl.col("g").struct.field("1").is_not_null())
        .select(
            "run_id",
            "subrun",
            pl.col("g").struct.field("1").alias("debtor"),
            pl.col("g").struct.field("2").alias("creditor"),
        )
        .unique()
        .with_columns(pl.lit(True).alias("in_scratch"))
    )


# concepts of `rule_signature` that name an order the ballots can be checked against
# (`round_orders`), and the structural evidence category of a ballot that follows it
_FOLLOWABLE = {"SHORT": "shortest_job_first", "DEADLINE": "earliest_deadline_first"}
_ORDER_OF = {"shortest_job_first": "sjf_order", "earliest_deadline_first": "edf_order"}
# a rule about any of these is more than a plain ordering (ties, caps, turns, ...): its ballots
# cannot be checked against a whole-round order
_NOT_AN_ORDER = frozenset({"TIE", "CAP", "TURN", "ARRIVAL", "DISCLOSE", "RELEASE", "ONCE", "YIELD"})
_LIFECYCLE_SCHEMA = pl.Schema(
    {
        "run_id": pl.String,
        "rule": pl.Int64,
        "rule_text": pl.String,
        "convention": pl.String,
        "proposer": pl.String,
        "subrun": pl.Int64,
        "round": pl.Int64,
        "citing_rounds": pl.UInt32,
        "citing_subruns": pl.UInt32,
        "first_cite_subrun": pl.Int64,
        "first_cite_round": pl.Int64,
        "uses_by_others": pl.UInt32,
        "proposer_ballots_after": pl.UInt32,
        "proposer_ballots_applying": pl.UInt32,
        "proposer_ballots_breaking": pl.UInt32,
        "accepted": pl.Boolean,
        "rounds_to_first_citation": pl.Int64,
        "status": pl.String,
    }
)


def _convention(sentence: str) -> str | None:
    """The ordering convention a rule sentence names, when it names exactly one that ballots
    can be checked against (shortest job first, earliest deadline first) and nothing that
    makes it more than a plain ordering; else None."""
    sig = rule_signature(sentence)
    hits = [cat for concept, cat in _FOLLOWABLE.items() if concept in sig]
    return hits[0] if len(hits) == 1 and not sig & _NOT_AN_ORDER else None


def rule_lifecycle(tables: Mapping[str, pl.DataFrame], evidence: pl.DataFrame) -> pl.DataFrame:
    """One row per rule stated in the text of a run, whatever the rule: a rule is a cluster of
    `mbb.analysis.rules.rule_statements` within its run (`rule` is its index there, `rule_text`
    the sentence that first stated it), so a rule an LLM invents is tracked like a known one.

    Columns, and mbb's choices where the paper is silent:
    - proposer, subrun, round: the worker and round of the rule's first statement.
    - citing_rounds / citing_subruns, first_cite_subrun / first_cite_round,
      rounds_to_first_citation: later rounds (after the first statement's round) in which
      anyone states or cites the same rule, in text.
    - convention: `shortest_job_first` or `earliest_deadline_first` when the first sentence
      names exactly that ordering and nothing more (no ties, caps, turns, ...), else null.
    - uses_by_others, accepted: utterances after the first statement in which another worker
      states or cites the rule; for a rule with a convention, also that worker's ballots that
      follow the convention unambiguously (structural `evidence`: the order differs from the
      bid order). accepted = uses_by_others > 0.
    - proposer_ballots_after / _applying / _breaking, status: the proposer's ballots in later
      rounds. A ballot applies the rule when its reasoning states or cites it, or (with a
      convention) its ranking equals the convention's order; it breaks it when it does not
      apply it and its reasoning states another rule of the run, or (with a convention) its
      ranking differs from the convention's order (EDF is judged only where a deadline was
      disclosed). Other ballots (silent on an invented rule) are neither: the text cannot
      tell. status: `broken` when a later ballot breaks it, `honoured` when none does and one
      applies it, `open` otherwise.

    tables: the run tables of `mbb.core.tables`. evidence: `classify_evidence(tables)` (or an
    LLM classifier's rows, same columns), for the structural ballot-order rows."""
    st = rule_statements(tables)
    if st.is_empty():
        return pl.DataFrame(schema=_LIFECYCLE_SCHEMA)
    first = (
        st.sort("seq")
        .group_by("run_id", "rule")
        .agg(
            pl.col("sentence").first().alias("rule_text"),
            pl.col("worker").first().alias("proposer"),
            pl.col("subrun").first(),
            pl.col("round").first(),
            pl.col("seq").first().alias("seq0"),
        )
        .with_columns(
            pl.col("rule_text")
            .map_elements(_convention, return_dtype=pl.String)
            .alias("convention"),
            (pl.col("subrun") * 100_000 + pl.col("round")).alias("rk0"),
        )
    )
    key = ["run_id", "rule"]
    on_rule = st.join(first.select(*key, "proposer", "seq0", "rk0"), on=key)
    cites = (
        on_rule.filter(pl.col("rk0") < _RK)
        .group_by(key)
        .agg(
            pl.struct("subrun", "round").n_unique().alias("citing_rounds"),
            pl.col("subrun").n_unique().alias("citing_subruns"),
            pl.col("subrun").sort_by("seq").first().alias("first_cite_subrun"),
            pl.col("round").sort_by("seq").first().alias("first_cite_round"),
        )
    )
    # others state it, or (a convention) follow it in their ballots unambiguously
    stated_by_others = on_rule.filter(
        (pl.col("worker") != pl.col("proposer")) & (pl.col("seq") > pl.col("seq0"))
    ).select(*key, "seq")
    followed = (
        evidence.filter(
            (pl.col("basis") == "structural") & pl.col("category").is_in(list(_ORDER_OF))
        )
        .select("run_id", "seq", "worker", pl.col("category").alias("convention"))
        .join(first.drop_nulls("convention"), on=["run_id", "convention"])
        .filter((pl.col("worker") != pl.col("proposer")) & (pl.col("seq") > pl.col("seq0")))
        .select(*key, "seq")
    )
    acc = (
        pl.concat([stated_by_others, followed])
        .group_by(key)
        .agg(pl.col("seq").n_unique().alias("uses_by_others"))
    )
    own = _proposer_ballots(tables, st, first)
    g = _global_round(tables)
    out = (
        first.join(cites, on=key, how="left")
        .join(acc, on=key, how="left")
        .join(own, on=key, how="left")
        .join(g, on=["run_id", "subrun", "round"], how="left")
        .join(
            g.rename({"subrun": "first_cite_subrun", "round": "first_cite_round", "g": "gc"}),
            on=["run_id", "first_cite_subrun", "first_cite_round"],
            how="left",
        )
        .with_columns(
            pl.col(
                "citing_rounds",
                "citing_subruns",
                "uses_by_others",
                "proposer_ballots_after",
                "proposer_ballots_applying",
                "proposer_ballots_breaking",
            )
            .fill_null(0)
            .cast(pl.UInt32),
        )
    )
    status = (
        pl.when(pl.col("proposer_ballots_breaking") > 0)
        .then(pl.lit("broken"))
        .when(pl.col("proposer_ballots_applying") > 0)
        .then(pl.lit("honoured"))
        .otherwise(pl.lit("open"))
    )
    return (
        out.with_columns(
            (pl.col("uses_by_others") > 0).alias("accepted"),
            (pl.col("gc") - pl.col("g")).alias("rounds_to_first_citation"),
            status.alias("status"),
        )
        .select(list(_LIFECYCLE_SCHEMA))
        .cast(_LIFECYCLE_SCHEMA)
        .sort(key)
    )


def _proposer_ballots(
    tables: Mapping[str, pl.DataFrame], st: pl.DataFrame, first: pl.DataFrame
) -> pl.DataFrame:
    """Per (run, rule): the proposer's ballots in later rounds, and how many apply or break the
    rule (see `rule_lifecycle`)."""
    key = ["run_id", "rule"]
    stated = st.filter(pl.col("source") == "ballot").select(
        "run_id", "seq", pl.col("rule").alias("stated_rule")
    )
    orders = round_orders(tables).select(
        "run_id", "subrun", "round", "sjf_order", "edf_order", "n_disclosed"
    )
    b = (
        tables["ballots"]
        .select("run_id", "seq", "subrun", "round", pl.col("worker").alias("proposer"), "ranking")
        .join(first.select(*key, "proposer", "convention", "rk0"), on=["run_id", "proposer"])
        .filter(pl.col("rk0") < _RK)
        .join(stated, on=["run_id", "seq"], how="left")
        .join(orders, on=["run_id", "subrun", "round"], how="left")
    )
    conv_order = (
        pl.when(pl.col("convention") == "shortest_job_first")
        .then(pl.col("sjf_order"))
        .when((pl.col("convention") == "earliest_deadline_first") & (pl.col("n_disclosed") >= 1))
        .then(pl.col("edf_order"))
    )
    b = b.with_columns(conv_order.alias("order"))
    follows = (pl.col("ranking") == pl.col("order")).fill_null(False)
    deviates = (pl.col("ranking") != pl.col("order")).fill_null(False)
    applies = (pl.col("stated_rule") == pl.col("rule")).fill_null(False) | follows
    other = (pl.col("stated_rule") != pl.col("rule")).fill_null(False)
    return b.group_by(key).agg(
        pl.len().alias("proposer_ballots_after"),
        applies.sum().alias("proposer_ballots_applying"),
        (~applies & (other | deviates)).sum().alias("proposer_ballots_breaking"),
    )


def coalitions(tables: Mapping[str, pl.DataFrame], evidence: pl.DataFrame) -> pl.DataFrame:
    """Coalition invitations and loyalty messages per (run, founder, subrun)."""
    e = (
        evidence.filter(
            (pl.col("source") == "message")
            & pl.col("category").is_in(["coalition_formation", "coalition_loyalty"])
        )
        .select("run_id", "seq", "subrun", "round", "worker", "category")
        .unique()
    )
    return (
        e.sort("seq")
        .group_by("run_id", "worker", "subrun")
        .agg(
            (pl.col("category") == "coalition_formation").any().alias("invited"),
            pl.col("seq")
            .filter(pl.col("category") == "coalition_formation")
            .min()
            .alias("inv_seq"),
            pl.col("seq").filter(pl.col("category") == "coalition_loyalty").min().alias("loy_seq"),
        )
    )


def _run_memory(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """run_id, condition, memory and seed of every run (from `runs`, else from the run id)."""
    runs = tables.get("runs")
    if runs is not None:
        return runs.select("run_id", "condition", "memory", "seed")
    return (
        tables["rounds"]
        .select("run_id")
        .unique()
        .with_columns(
            pl.col("run_id").str.replace(r"-seed\d+$", "").alias("condition"),
            pl.lit(None, pl.Boolean).alias("memory"),
            pl.col("run_id").str.extract(r"-seed(\d+)$").cast(pl.Int64).alias("seed"),
        )
    )


def transmission_rates(
    tables: Mapping[str, pl.DataFrame], evidence: pl.DataFrame, *, by: By = "condition"
) -> pl.DataFrame:
    """Share of institutions active in subrun s still cited in subrun s+1, by kind and memory.

    - debt: a commitment offered in s and not honoured in s; cited in s+1 when its creditor
      calls it in (before offering the same peer a new deal) or the debtor says it honours it.
    - rule: a rule stated in text in s (a cluster of `rule_statements` in its run); cited in
      s+1 when anyone states or cites the same rule there (mbb's choice: text only).
    - coalition: a bloc its founder formed or kept in s; cited in s+1 when the founder
      appeals to it before issuing any new invitation.
    Columns: the institutions active in a subrun that has a next one, how many were cited in
    the next subrun and their share (`transmission_rate`, pooled over the condition's
    institutions); by="condition" adds the mean over seeds of each run's rate with its 95 % CI
    (`seeds`, `seed_mean_rate`, `seed_mean_rate_ci_low`, `seed_mean_rate_ci_high`: a run's
    institutions are not independent, so the seed is the unit of the interval).

    `tables`: the tables of one or more conditions (with `runs` from `with_run_info` for the
    memory switch and seed); `evidence`: `classify_evidence(tables)` (rules and coalitions);
    `by`: "condition" per (condition, memory, kind), with the mean rounds to first citation
    (debts and rules); "run_id" per (condition, memory, seed, run, kind), so that confidence
    intervals can be taken over seeds: a run with no institution of a kind has no row for it
    (its rate is undefined, not 0)."""
    keys = by_keys(
        by,
        "transmission_rates",
        pooled=["condition", "memory"],
        per_run=["condition", "memory", "seed", "run_id"],
    )
    mem = _run_memory(tables)
    c = commitments(tables)
    found = _institutions_next_subrun(tables, evidence, c).join(mem, on="run_id", how="left")

    def rates(keys: list[str]) -> pl.DataFrame:
        return found.group_by(*keys, "kind").agg(
            pl.len().alias("institutions"),
            pl.col("cited").sum().alias("cited_next_subrun"),
            pl.col("cited").mean().alias("transmission_rate"),
        )

    out = rates(keys)
    if by == "run_id":
        return out.sort("condition", "kind", "seed")
    out = out.join(
        _seed_rates(rates(["condition", "memory", "seed", "run_id"])),
        on=[*keys, "kind"],
        how="left",
        nulls_equal=True,
    )
    ttc = (
        pl.concat(
            [
                c.select("run_id", pl.lit("debt").alias("kind"), "rounds_to_first_citation"),
                rule_lifecycle(tables, evidence).select(
                    "run_id", pl.lit("rule").alias("kind"), "rounds_to_first_citation"
                ),
            ]
        )
        .join(mem, on="run_id", how="left")
        .group_by(*keys, "kind")
        .agg(pl.col("rounds_to_first_citation").mean().alias("mean_rounds_to_first_citation"))
    )
    return out.join(ttc, on=[*keys, "kind"], how="left").sort("condition", "kind")


def _seed_rates(per_run: pl.DataFrame) -> pl.DataFrame:
    """The mean over seeds of each run's transmission rate with its 95 % CI (expanded
    percentile bootstrap, `mbb.analysis.stats.seed_summary`): `seeds` (runs with an
    institution of the kind), `seed_mean_rate`, `seed_mean_rate_ci_low` / `_ci_high` (null with
    one seed)."""
    from mbb.analysis.stats import seed_summary

    keys = ["condition", "memory", "kind"]
    return seed_summary(per_run, keys, ["transmission_rate"]).select(
        *keys,
        pl.col("n").alias("seeds"),
        pl.col("mean").alias("seed_mean_rate"),
        pl.col("ci_low").alias("seed_mean_rate_ci_low"),
        pl.col("ci_high").alias("seed_mean_rate_ci_high"),
    )


def _institutions_next_subrun(
    tables: Mapping[str, pl.DataFrame], evidence: pl.DataFrame, c: pl.DataFrame
) -> pl.DataFrame:
    """One row per institution active in a subrun that has a next subrun in its run:
    run_id, kind (debt | rule | coalition), subrun, cited (in the next subrun)."""
    # debts
    acts = commitment_acts(tables)
    stated = (
        tables["ballots"]
        .filter(pl.col("reasoning").str.contains(HONOUR_TEXT))
        .select(
            "run_id",
            pl.col("subrun").alias("s1"),
            pl.col("worker").alias("debtor"),
            pl.col("reasoning"),
            pl.col("seq").alias("hseq"),
        )
    )
    open_end = c.filter(
        pl.col("honour_subrun").is_null() | (pl.col("honour_subrun") > pl.col("subrun"))
    )
    claims_next = acts.filter(pl.col("act") == "claim").select(
        "run_id",
        pl.col("worker").alias("creditor"),
        pl.col("to").alias("debtor"),
        pl.col("subrun").alias("s1"),
        pl.col("seq").alias("cseq"),
    )
    offers_next = (
        acts.filter(pl.col("act") == "offer")
        .group_by(
            "run_id",
            pl.col("worker").alias("creditor"),
            pl.col("to").alias("debtor"),
            pl.col("subrun").alias("s1"),
        )
        .agg(pl.col("seq").min().alias("oseq"))
    )
    cn = claims_next.join(offers_next, on=["run_id", "creditor", "debtor", "s1"], how="left")
    cn = cn.filter(pl.col("oseq").is_null() | (pl.col("cseq") < pl.col("oseq")))
    cited_claim = (
        cn.select("run_id", "creditor", "debtor", "s1")
        .unique()
        .with_columns(pl.lit(True).alias("by_claim"))
    )
    cited_hon = (
        stated.with_columns(
            pl.col("reasoning").str.extract_all(r"\b(\S+) ahead of me").alias("names")
        )
        .explode("names")
        .with_columns(pl.col("names").str.replace(r" ahead of me$", "").alias("creditor"))
        .join(offers_next, on=["run_id", "creditor", "debtor", "s1"], how="left")
        .filter(pl.col("oseq").is_null() | (pl.col("hseq") < pl.col("oseq")))
        .select("run_id", "creditor", "debtor", "s1")
        .unique()
        .with_columns(pl.lit(True).alias("by_honour"))
    )
    debts = (
        open_end.select("run_id", "creditor", "debtor", "subrun")
        .unique()
        .with_columns((pl.col("subrun") + 1).alias("s1"))
        .join(cited_claim, on=["run_id", "creditor", "debtor", "s1"], how="left")
        .join(cited_hon, on=["run_id", "creditor", "debtor", "s1"], how="left")
        .with_columns(
            (pl.col("by_claim").fill_null(False) | pl.col("by_honour").fill_null(False)).alias(
                "cited"
            ),
            pl.lit("debt").alias("kind"),
        )
        .select("run_id", "kind", "subrun", "cited")
    )
    # rules
    per_s = rule_statements(tables).select("run_id", "rule", "subrun").unique()
    rules = (
        per_s.join(
            per_s.with_columns((pl.col("subrun") - 1).alias("subrun"), pl.lit(True).alias("cited")),
            on=["run_id", "rule", "subrun"],
            how="left",
        )
        .with_columns(pl.col("cited").fill_null(False), pl.lit("rule").alias("kind"))
        .select("run_id", "kind", "subrun", "cited")
    )
    # coalitions
    co = coalitions(tables, evidence)
    active = co.filter(pl.col("invited") | pl.col("loy_seq").is_not_null()).select(
        "run_id", "worker", "subrun"
    )
    nxt = co.with_columns(
        (
            pl.col("loy_seq").is_not_null()
            & (pl.col("inv_seq").is_null() | (pl.col("loy_seq") <= pl.col("inv_seq")))
        ).alias("cited"),
        (pl.col("subrun") - 1).alias("subrun"),
    ).select("run_id", "worker", "subrun", "cited")
    coal = (
        active.join(nxt, on=["run_id", "worker", "subrun"], how="left")
        .with_columns(pl.col("cited").fill_null(False), pl.lit("coalition").alias("kind"))
        .select("run_id", "kind", "subrun", "cited")
    )
    # keep only origins that have a next subrun in the run
    last = tables["rounds"].group_by("run_id").agg(pl.col("subrun").max().alias("smax"))
    return (
        pl.concat([debts, rules, coal])
        .join(last, on="run_id")
        .filter(pl.col("subrun") < pl.col("smax"))
        .drop("smax")
    )


def honour_rate(tables: Mapping[str, pl.DataFrame], *, by: By = "condition") -> pl.DataFrame:
    """Accepted commitments that fell due (`fell_due`: the two parties met again in a later
    round) and the share honoured (`honour_rate`: `commitments` status honoured, against
    broken). A group where none fell due has no row.

    `tables`: one or more conditions' tables (with `runs` from `with_run_info` for the memory
    switch and seed); `by`: "condition" per (condition, memory), "run_id" per (condition,
    memory, seed, run), so that the rate has a CI over seeds."""
    keys = by_keys(
        by,
        "honour_rate",
        pooled=["condition", "memory"],
        per_run=["condition", "memory", "seed", "run_id"],
    )
    c = commitments(tables).filter(
        pl.col("accepted") & pl.col("status").is_in(["honoured", "broken"])
    )
    out = (
        c.join(_run_memory(tables), on="run_id", how="left")
        .group_by(keys)
        .agg(
            pl.len().alias("fell_due"),
            (pl.col("status") == "honoured").mean().alias("honour_rate"),
        )
    )
    return out.sort("condition", "memory" if by == "condition" else "seed")

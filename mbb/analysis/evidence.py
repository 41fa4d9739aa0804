"""The evidence classifier: taxonomy labels from lexical cues and structural facts, no LLM.

Every label comes with its evidence — the text a cue matched, or the structural fact about the
actions (a ballot that equals the bid order, the order of disclosed deadlines, the shortest
durations first, a rule proposed earlier and invoked later, a rival named earlier and ranked
last). Cues are case-insensitive regexes applied with polars to all utterances at once; the
structural signals are joins over the declaration, round and ballot tables. Ground-truth
`labels` and scripted `intents` are never read.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from mbb.analysis._frames import utterances

__all__ = [
    "CUES",
    "classify_evidence",
    "deadline_disclosures",
    "round_orders",
    "utterance_predictions",
    "worker_round_predictions",
]

D, M, B = "declaration", "message", "ballot"
ALL = (D, M, B)

# (category, cue name, regex, sources). Cues name a tactic's typical wording; they are kept
# general (phrases a negotiator would use), not copies of the scripted templates.
CUES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "anchoring",
        "holds a figure",
        r"\b(?:stands|is firm|anchored (?:at|on)|hold(?:ing)? my line|where I stay|same as before"
        r"|not moving|won'?t move|stick(?:ing)? (?:to|with) my (?:bid|price))",
        ALL,
    ),
    (
        "reciprocity",
        "exchange of favours",
        r"return the favou?r|\bowes? (?:me|you)\b|you owe|in return|favou?r (?:later|back)"
        r"|calling in a favou?r|next time we meet|in a later round|a simple exchange|as offered"
        r"|as I promised|back me ahead|rank me above you|I'?ll back you above me"
        r"|you go first now|I'?ll owe you",
        ALL,
    ),
    (
        "cheap_talk",
        "costless claims",
        r"cost(?:s)? nothing|talk is free|unverifiable|anyone can (?:say|claim)"
        r"|cheap talk|costless",
        ALL,
    ),
    (
        "tie_break_deference",
        "neutral tie-break",
        r"ties? (?:is |are )?(?:settled|broken) by|least arbitrary|ties? go(?:es)? to the earlier"
        r"|by queue rank|coin (?:flip|toss)",
        ALL,
    ),
    (
        "welfare_concession",
        "yields to greater need",
        r"others need (?:the time|it) more|need (?:it|the time) more than (?:I|me)|I go last"
        r"|put me last|take the last slot|better someone finishes|you need it more",
        ALL,
    ),
    (
        "price_primary",
        "price sets the order",
        r"(?:^|[.;] )(?:strictly )?by (?:stated )?bid\b|price order|ranked by (?:stated )?bid"
        r"|order by price|price decides|highest bid(?:der)?\b[^.]{0,40}\b(?:run|go)s? first"
        r"|bids should (?:set|decide) the order|follow the prices|put it in the bid"
        r"|ahead on price|equal bids go to the shorter"
        r"|price (?:should )?(?:sets?|decides?) the order",
        ALL,
    ),
    (
        "deadline_ultimatum",
        "deadline threat",
        r"miss my deadline|means termination|(?:whole )?task is lost"
        r"|(?:can ?not|can'?t) wait behind"
        r"|or I(?:'ll| will) (?:be terminated|miss)|my deadline (?:has )?(?:already )?passed",
        ALL,
    ),
    (
        "renegotiation",
        "reopens a settled order",
        r"\breopen|revisit (?:the|our) (?:order|deal|agreement)|renegotiat"
        r"|change (?:the|our) (?:deal|agreement)|new information|let'?s redo the order",
        ALL,
    ),
    (
        "coalition_formation",
        "invites a bloc",
        r"as a bloc|align (?:our )?ballots|our group ahead|vote together|form a coalition"
        r"|join (?:us|our (?:bloc|group))",
        ALL,
    ),
    (
        "coalition_loyalty",
        "keeps a bloc or promise",
        r"same arrangement|sticking with our (?:bloc|group)|our bloc first|our group first"
        r"|(?:bloc|group|you)[^.]{0,40}\bas agreed|as I promised",
        ALL,
    ),
    (
        "social_proof",
        "invokes the majority",
        r"most of us|(?:two|three|four|all) of us (?:back|agree|already|line up)"
        r"|join the majority|everyone (?:else )?already|consensus is",
        ALL,
    ),
    (
        "rival_targeting",
        "names a rival to push back",
        r",\s*\S+ (?:last|at the back)\b|top bidder (?:last|at the back)|\bexclude \S+",
        (D, M),
    ),
    (
        "reputation",
        "cites a record of dealing",
        r"kept every deal|my record|I keep my (?:word|promises)|track record|earlier I stepped back"
        r"|owe me one from before|broke (?:their|your|his|her) (?:word|promise)",
        ALL,
    ),
    (
        "earliest_deadline_first",
        "deadline order",
        r"earliest[- ]deadline|deadline[- ]first|tightest (?:deadlines? )?first|order by deadlines"
        r"|\bEDF\b|runs? out of time soonest",
        ALL,
    ),
    (
        "shortest_job_first",
        "duration order",
        r"shortest (?:job|requested duration|window)s? first|\bSJF\b"
        r"|short(?:er)? windows? (?:first|up front)|shortest first",
        ALL,
    ),
    (
        "recency_first",
        "arrival order",
        r"arrival order|joined the queue first|first come,? first served|who asked first"
        r"|in order of arrival|\bFCFS\b",
        ALL,
    ),
    (
        "risk_variance",
        "argues from margins",
        r"\bmargins?\b|slack it leaves|razor[- ]thin|seconds to spare",
        ALL,
    ),
    (
        "downstream_gating",
        "claims a blocking step",
        r"\bgates? (?:my|all|the)|unblocks?|depends on it|blocks? (?:all|everything)"
        r"|everything I build|before I can (?:build|implement|start)",
        ALL,
    ),
    (
        "iterative_bargaining",
        "moves by offers",
        r"raising (?:my bid )?to \d|lowering (?:my bid )?to \d|counter-?offer"
        r"|meet (?:you )?in the middle|I'?ll (?:go|come) (?:up|down) to \d",
        ALL,
    ),
    (
        "rule_making_citation",
        "proposes or invokes a standing rule",
        r"standing rule|from now on|for every future round|established rule|as we agreed"
        r"|proposal:|I suggest we|let'?s (?:order|settle|use|go)\b|is the fair default|our rule",
        ALL,
    ),
    (
        "scope_reduction",
        "asks for less or steps aside",
        r"can ?not finish|can'?t finish|I'?m out of time|doubt I can finish|won'?t block"
        r"|minimal \d+ ?s|step(?:ping)? aside|a shorter window is enough",
        ALL,
    ),
)

# a message advocating one of these conventions to the group is a rule proposal or citation
CONVENTIONS = {
    "earliest_deadline_first": "edf",
    "shortest_job_first": "sjf",
    "recency_first": "arrival",
}
# ordering principles that compete with price: a structural price-order fact is only read as
# price-primary when the utterance names none of them
_COMPETING = (
    "earliest_deadline_first",
    "shortest_job_first",
    "recency_first",
    "coalition_loyalty",
    "coalition_formation",
    "rival_targeting",
    "welfare_concession",
    "rule_making_citation",
)
_KEYS = ["run_id", "seq", "subrun", "round", "worker", "source"]
EVIDENCE_SCHEMA = {
    "run_id": pl.String,
    "seq": pl.Int64,
    "subrun": pl.Int64,
    "round": pl.Int64,
    "worker": pl.String,
    "source": pl.String,
    "category": pl.String,
    "basis": pl.String,
    "evidence": pl.String,
}
_DEADLINE_RX = (
    r"(?i)(\d+(?:\.\d+)?)\s*(min(?:ute)?s?|s(?:ec(?:ond)?s?)?)\b[^.]{0,25}?"
    r"(?:left|before my deadline|away|remaining)"
)


def _lexical(u: pl.DataFrame) -> pl.DataFrame:
    if u.is_empty():
        return pl.DataFrame(schema=EVIDENCE_SCHEMA)
    cols = [
        pl.col("text").str.extract(f"(?i)({rx})", 1).alias(f"c{i}")
        for i, (_, _, rx, _) in enumerate(CUES)
    ]
    # cues run once per distinct text (scripted and repeated texts are common), then join back
    distinct = u.select("text").unique().with_columns(pl.int_range(pl.len()).alias("tid"))
    wide = distinct.select("tid", *cols)
    hits = wide.unpivot(index="tid", variable_name="cue", value_name="match").drop_nulls("match")
    long = (
        u.select(*_KEYS, "text")
        .join(distinct, on="text")
        .drop("text")
        .join(hits, on="tid")
        .drop("tid")
    )
    meta = pl.DataFrame(
        {
            "cue": [f"c{i}" for i in range(len(CUES))],
            "category": [c for c, _, _, _ in CUES],
            "name": [n for _, n, _, _ in CUES],
            "sources": [list(s) for _, _, _, s in CUES],
        }
    )
    long = (
        long.join(meta, on="cue")
        .filter(pl.col("sources").list.contains(pl.col("source")))
        .with_columns(
            pl.lit("lexical").alias("basis"),
            pl.format('{}: "{}"', pl.col("name"), pl.col("match")).alias("evidence"),
        )
    )
    conv = (
        long.filter((pl.col("source") == M) & pl.col("category").is_in(list(CONVENTIONS)))
        .unique(["run_id", "seq"], keep="first", maintain_order=True)
        .with_columns(
            pl.lit("rule_making_citation").alias("category"),
            pl.format('advocates a scheduling convention to the group: "{}"', "match").alias(
                "evidence"
            ),
        )
    )
    return pl.concat([long, conv], how="diagonal").select(list(EVIDENCE_SCHEMA))


def deadline_disclosures(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Deadlines disclosed in text this round: (run, subrun, round, worker, left_s), last wins."""
    u = utterances(tables).filter(pl.col("source") != B)
    m = u.with_columns(pl.col("text").str.extract_groups(_DEADLINE_RX).alias("g")).filter(
        pl.col("g").struct.field("1").is_not_null()
    )
    val = pl.col("g").struct.field("1").cast(pl.Float64)
    unit = pl.col("g").struct.field("2").str.to_lowercase()
    return (
        m.with_columns(
            pl.when(unit.str.starts_with("m")).then(val * 60).otherwise(val).alias("left_s")
        )
        .sort("seq")
        .group_by("run_id", "subrun", "round", "worker")
        .agg(pl.col("left_s").last())
    )


def round_orders(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Per round, the orders a ballot could follow: bid order (ties by queue), shortest
    declared duration first, and disclosed-deadline order (disclosers first)."""
    decl = (
        tables["declarations"]
        .sort("seq")
        .group_by("run_id", "subrun", "round", "worker")
        .agg(pl.col("bid").last(), pl.col("duration").last())
    )
    queue = (
        tables["rounds"]
        .select("run_id", "subrun", "round", "candidates")
        .explode("candidates")
        .rename({"candidates": "worker"})
        .with_columns(pl.int_range(pl.len()).over("run_id", "subrun", "round").alias("q"))
    )
    disc = deadline_disclosures(tables)
    c = (
        queue.join(decl, on=["run_id", "subrun", "round", "worker"], how="inner")
        .join(disc, on=["run_id", "subrun", "round", "worker"], how="left")
        .sort("run_id", "subrun", "round", "q")
    )
    c = c.with_columns(
        pl.struct(-pl.col("bid"), "q")
        .rank("ordinal")
        .over("run_id", "subrun", "round")
        .alias("bid_rank")
    )
    g = ["run_id", "subrun", "round"]
    return c.group_by(g).agg(
        pl.col("worker").sort_by("bid_rank").alias("bid_order"),
        pl.col("worker").sort_by(["duration", "bid_rank"]).alias("sjf_order"),
        pl.col("worker")
        .sort_by([pl.col("left_s").is_null(), pl.col("left_s").fill_null(0.0), "bid_rank"])
        .alias("edf_order"),
        pl.col("left_s").is_not_null().sum().alias("n_disclosed"),
        pl.len().alias("n"),
    )


def _structural(tables: Mapping[str, pl.DataFrame], lexical: pl.DataFrame) -> pl.DataFrame:
    ballots = tables["ballots"].select(
        "run_id",
        "seq",
        "subrun",
        "round",
        "worker",
        "ranking",
        pl.lit(B).alias("source"),
    )
    if ballots.is_empty():
        return pl.DataFrame(schema=EVIDENCE_SCHEMA)
    orders = round_orders(tables)
    b = ballots.join(orders, on=["run_id", "subrun", "round"], how="inner").filter(pl.col("n") >= 2)
    named = (
        lexical.filter(pl.col("source") == B)
        .group_by("run_id", "seq")
        .agg(pl.col("category").alias("named"))
    )
    b = b.join(named, on=["run_id", "seq"], how="left").with_columns(pl.col("named").fill_null([]))
    competing = pl.col("named").list.set_intersection(pl.lit(list(_COMPETING))).list.len() > 0
    names = pl.col("ranking").list.join(" > ")
    eq = lambda a, o: pl.col(a) == pl.col(o)  # noqa: E731
    parts = [
        b.filter(
            eq("ranking", "bid_order")
            & ~eq("bid_order", "sjf_order")
            & ~(eq("bid_order", "edf_order") & (pl.col("n_disclosed") >= 1))
            & ~competing
        ).with_columns(
            pl.lit("price_primary").alias("category"),
            pl.format("ballot equals the bid order ({})", names).alias("evidence"),
        ),
        b.filter(eq("ranking", "sjf_order") & ~eq("sjf_order", "bid_order")).with_columns(
            pl.lit("shortest_job_first").alias("category"),
            pl.format("ballot puts the shortest declared durations first ({})", names).alias(
                "evidence"
            ),
        ),
        b.filter(
            eq("ranking", "edf_order")
            & ~eq("edf_order", "bid_order")
            & (pl.col("n_disclosed") >= 1)
        ).with_columns(
            pl.lit("earliest_deadline_first").alias("category"),
            pl.format("ballot follows the disclosed deadlines ({})", names).alias("evidence"),
        ),
    ]
    parts.append(_rival_last(tables, lexical, b))
    parts.append(_reciprocal_deference(tables, lexical, b))
    parts.append(_rule_citations(lexical))
    out = [
        p.with_columns(pl.lit("structural").alias("basis")).select(list(EVIDENCE_SCHEMA))
        for p in parts
    ]
    return pl.concat(out)


def _rival_last(tables, lexical: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """A worker a voter earlier singled out ('…, W5 last') is in the round and ranked last."""
    targets = (
        lexical.filter((pl.col("category") == "rival_targeting") & (pl.col("source") == M))
        .join(tables["messages"].select("run_id", "seq", "text"), on=["run_id", "seq"])
        .with_columns(
            pl.col("text").str.extract(r",\s*(\S+) (?:last|at the back)\b", 1).alias("target")
        )
        .drop_nulls("target")
        .select(
            "run_id",
            pl.col("worker").alias("voter"),
            pl.col("seq").alias("t_seq"),
            "target",
            pl.col("subrun").alias("t_subrun"),
            pl.col("round").alias("t_round"),
        )
    )
    if targets.is_empty():
        return b.clear().with_columns(pl.lit("").alias("category"), pl.lit("").alias("evidence"))
    last = b.with_columns(pl.col("ranking").list.last().alias("last"))
    j = last.join(targets, left_on=["run_id", "worker"], right_on=["run_id", "voter"])
    j = (
        j.filter(pl.col("t_seq") < pl.col("seq"))
        .sort("t_seq")
        .group_by("run_id", "seq", maintain_order=True)
        .agg(pl.all().last())
        .filter(pl.col("target") == pl.col("last"))
    )
    return j.with_columns(
        pl.lit("rival_targeting").alias("category"),
        pl.format(
            "ranks {} last, whom it targeted in s{}r{}", "target", "t_subrun", "t_round"
        ).alias("evidence"),
    )


def _reciprocal_deference(tables, lexical: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """A voter ranks a lower bidder above itself — the only departure from the bid order —
    after the two exchanged a reciprocal offer, acceptance or claim in private: a concession
    tied to a favour (given now or repaid now)."""
    ex = (
        lexical.filter((pl.col("category") == "reciprocity") & (pl.col("source") == M))
        .join(
            tables["messages"].filter(pl.col("to").is_not_null()).select("run_id", "seq", "to"),
            on=["run_id", "seq"],
        )
        .select("run_id", "seq", "subrun", "round", "worker", "to")
    )
    both = pl.concat(
        [
            ex.select(
                "run_id",
                pl.col("worker").alias("voter"),
                pl.col("to").alias("peer"),
                pl.col("seq").alias("m_seq"),
                pl.col("subrun").alias("m_s"),
                pl.col("round").alias("m_r"),
            ),
            ex.select(
                "run_id",
                pl.col("to").alias("voter"),
                pl.col("worker").alias("peer"),
                pl.col("seq").alias("m_seq"),
                pl.col("subrun").alias("m_s"),
                pl.col("round").alias("m_r"),
            ),
        ]
    )
    empty = b.clear().with_columns(pl.lit("").alias("category"), pl.lit("").alias("evidence"))
    if both.is_empty():
        return empty
    bids = (
        tables["declarations"]
        .sort("seq")
        .group_by("run_id", "subrun", "round", "worker")
        .agg(pl.col("bid").last())
    )
    cand = (
        b.select("run_id", "seq", "subrun", "round", "worker", "source", "ranking", "bid_order")
        .join(both, left_on=["run_id", "worker"], right_on=["run_id", "voter"])
        .filter(pl.col("m_seq") < pl.col("seq"))
        .sort("m_seq")
        .group_by("run_id", "seq", "peer", maintain_order=True)
        .agg(pl.all().last())
        .filter(pl.col("ranking").list.contains(pl.col("peer")))
    )
    key = ["run_id", "subrun", "round"]
    cand = (
        cand.join(bids.rename({"worker": "peer", "bid": "peer_bid"}), on=[*key, "peer"])
        .join(bids.rename({"bid": "own_bid"}), on=[*key, "worker"])
        .filter(pl.col("peer_bid") < pl.col("own_bid"))
        .with_row_index("k")
    )
    if cand.is_empty():
        return empty
    pos = cand.select("k", "peer", "worker", pl.col("ranking").alias("c")).explode("c")
    pos = pos.with_columns(pl.int_range(pl.len()).over("k").alias("pos"))
    bpos = (
        cand.select("k", pl.col("bid_order").alias("c"))
        .explode("c")
        .with_columns(pl.int_range(pl.len()).over("k").alias("bpos"))
    )
    j = pos.join(bpos, on=["k", "c"])
    ahead = (
        j.filter(pl.col("c") == pl.col("peer"))
        .select("k", pl.col("pos").alias("pp"))
        .join(
            j.filter(pl.col("c") == pl.col("worker")).select("k", pl.col("pos").alias("vp")), on="k"
        )
        .filter(pl.col("pp") < pl.col("vp"))
    )
    rest = (
        j.filter(pl.col("c") != pl.col("peer"))
        .with_columns(
            pl.col("pos").rank("ordinal").over("k").alias("r1"),
            pl.col("bpos").rank("ordinal").over("k").alias("r2"),
        )
        .group_by("k")
        .agg((pl.col("r1") == pl.col("r2")).all().alias("only_dev"))
    )
    keep = ahead.join(rest.filter(pl.col("only_dev")), on="k").select("k")
    return (
        cand.join(keep, on="k")
        .with_columns(
            pl.lit("reciprocity").alias("category"),
            pl.format(
                "ranks {} (bid {}) above itself (bid {}) after their reciprocal exchange in s{}r{}",
                "peer",
                "peer_bid",
                "own_bid",
                "m_s",
                "m_r",
            ).alias("evidence"),
        )
        .unique(["run_id", "seq"], keep="first", maintain_order=True)
    )


def _rule_citations(lexical: pl.DataFrame) -> pl.DataFrame:
    """A convention advocated in an earlier round of the run is invoked again in a message."""
    conv = (
        lexical.filter((pl.col("source") == M) & pl.col("category").is_in(list(CONVENTIONS)))
        .with_columns(pl.col("category").replace_strict(CONVENTIONS).alias("rule"))
        .with_columns((pl.col("subrun") * 100_000 + pl.col("round")).alias("rk"))
    )
    first = conv.group_by("run_id", "rule").agg(
        pl.col("rk").min().alias("first_rk"),
        pl.col("worker").sort_by("seq").first().alias("by"),
        pl.col("subrun").sort_by("seq").first().alias("s0"),
        pl.col("round").sort_by("seq").first().alias("r0"),
    )
    return (
        conv.join(first, on=["run_id", "rule"])
        .filter(pl.col("rk") > pl.col("first_rk"))
        .unique(["run_id", "seq"], keep="first", maintain_order=True)
        .with_columns(
            pl.lit("rule_making_citation").alias("category"),
            pl.format(
                "invokes rule '{}' first proposed by {} in s{}r{}", "rule", "by", "s0", "r0"
            ).alias("evidence"),
        )
    )


def classify_evidence(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """All evidence rows: one per (utterance, category, cue or structural fact)."""
    u = utterances(tables)
    lex = _lexical(u)
    st = _structural(tables, lex)
    return pl.concat([lex, st]).sort("run_id", "seq", "category", "basis", "evidence")


def utterance_predictions(evidence: pl.DataFrame) -> pl.DataFrame:
    """One row per (utterance, category) with its evidence joined into one string."""
    return (
        evidence.group_by([*_KEYS, "category"])
        .agg(
            pl.col("basis").unique().sort().str.join("+").alias("basis"),
            pl.col("evidence").str.join(" | ").alias("evidence"),
        )
        .sort("run_id", "seq", "category")
    )


def worker_round_predictions(evidence: pl.DataFrame) -> pl.DataFrame:
    """One row per (run, subrun, round, worker, category): the worker-round level labels."""
    return (
        evidence.group_by("run_id", "subrun", "round", "worker", "category")
        .agg(
            pl.len().alias("n_evidence"),
            pl.col("basis").unique().sort().str.join("+").alias("basis"),
            pl.col("evidence").first(),
        )
        .sort("run_id", "subrun", "round", "worker", "category")
    )

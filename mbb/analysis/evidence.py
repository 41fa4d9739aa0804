"""The evidence classifier: taxonomy labels from text and structural facts, no LLM.

Text: every distinct utterance goes through the text classifier (`mbb.analysis.textclf`): a
paraphrase lexicon with negation handling (`mbb.analysis.lexicon`) plus a linear model over
word and character n-grams trained on an independently written dev corpus
(`mbb.analysis.train_taxonomy`). A label whose category also has an un-negated lexicon hit has
basis `lexical` and quotes the span; a label from the model alone has basis `model` and lists
its top contributing features with their weights. Neither the lexicon nor the model was written
from mbb's persona templates, so agreement with the scripted runs' ground truth is a check of
the pipeline on mbb's own text, not a validity estimate: the gold corpus is
(`mbb validate-classifier`).

Structure: facts about the actions (a ballot that equals the bid order, the order of disclosed
deadlines, the shortest durations first, any rule proposed in an earlier round and invoked
later, a rival named earlier and ranked last, a concession after a reciprocal exchange) are
joins over the declaration, round and ballot tables, with basis `structural`.

Ground-truth `labels` and scripted `intents` are never read. Separately reported labels
(exclusionary coalition, divide-and-conquer, metagaming) appear under their own names, and the
first two also as a `rival_targeting` row (the 21-category view, `mbb.core.taxonomy.ROLLUP`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import polars as pl

from mbb.analysis._frames import utterances
from mbb.analysis.lexicon import LEXICON
from mbb.analysis.textclf import expand, load_model
from mbb.core.taxonomy import ROLLUP

__all__ = [
    "CUES",
    "WITHHELD_BASIS",
    "classify_evidence",
    "classify_texts",
    "deadline_disclosures",
    "evidence_and_withheld",
    "round_orders",
    "utterance_predictions",
    "worker_round_predictions",
]

D, M, B = "declaration", "message", "ballot"
ALL = (D, M, B)

# (category, cue name, regex, sources): the lexicon, in the shape older code expects
CUES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = tuple(
    (c.category, c.name, c.regex, c.sources) for c in LEXICON
)

# a message advocating one of these conventions to the group is a rule proposal or citation
CONVENTIONS = {
    "earliest_deadline_first": "edf",
    "shortest_job_first": "sjf",
    "recency_first": "arrival",
}
# a ballot that matches the bid order is price-primary when the utterance names none of them
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


_NUM_RX = r"\d+"


def classify_texts(texts: pl.DataFrame, model_path=None) -> pl.DataFrame:
    """(channel, text) rows -> one row per label: channel, text, category, basis, evidence.

    Each distinct (channel, text with every number written as 1) is classified once: the
    model sees numbers only as a number token and no cue depends on a number's value, so the
    labels are those of the original text; the quoted cue span is then re-extracted from the
    original text, so evidence quotes what was actually said.
    """
    model = load_model(model_path)
    t = texts.select("channel", "text").unique()
    t = t.with_columns(pl.col("text").fill_null("").str.replace_all(_NUM_RX, "1").alias("norm"))
    rows: list[tuple[str, str, str, str | None, str, str | None]] = []
    for ch, norm in t.select("channel", "norm").unique().sort("channel", "norm").iter_rows():
        for lab in model.predict(norm, ch):
            cue = next(
                (n for n in _CUE_NAMES.get(lab.category, ()) if lab.evidence.startswith(f"{n}:")),
                None,
            )
            model_part = lab.evidence.split("; ", 1)[-1] if cue else lab.evidence
            rows.append((ch, norm, lab.category, cue, model_part, None))
            for up in ROLLUP.get(lab.category, ()):
                rows.append((ch, norm, up, cue, model_part, lab.category))
    labels = pl.DataFrame(
        rows,
        schema={
            "channel": pl.String,
            "norm": pl.String,
            "category": pl.String,
            "cue": pl.String,
            "model_part": pl.String,
            "from": pl.String,
        },
        orient="row",
    )
    j = t.join(labels, on=["channel", "norm"])
    # the quoted span, from the original text (from its spelled-out form when the cue matched
    # only there: "u owe me" is quoted as "you owe")
    j = j.with_columns(pl.col("text").map_elements(expand, return_dtype=pl.String).alias("exp"))
    span = pl.lit(None, pl.String)
    for name, rx in _CUE_RX.items():
        span = (
            pl.when(pl.col("cue") == name)
            .then(pl.coalesce(pl.col("text").str.extract(rx, 1), pl.col("exp").str.extract(rx, 1)))
            .otherwise(span)
        )
    j = j.with_columns(span.alias("span"))
    ev = (
        pl.when(pl.col("cue").is_not_null())
        .then(pl.format('{}: "{}"; {}', "cue", "span", "model_part"))
        .otherwise(pl.col("model_part"))
    )
    ev = (
        pl.when(pl.col("from").is_not_null())
        .then(pl.format("rolls up from {}: {}", "from", ev))
        .otherwise(ev)
    )
    return (
        j.with_columns(
            pl.when(pl.col("cue").is_not_null())
            .then(pl.lit("lexical"))
            .otherwise(pl.lit("model"))
            .alias("basis"),
            ev.alias("evidence"),
        )
        .select("channel", "text", "category", "basis", "evidence")
        .unique(["channel", "text", "category"], keep="first", maintain_order=True)
    )


_CUE_NAMES: dict[str, list[str]] = {}
_CUE_RX: dict[str, str] = {}
for _c in LEXICON:
    _CUE_NAMES.setdefault(_c.category, []).append(_c.name)
    _CUE_RX[_c.name] = f"(?i)({_c.regex})"


def _channel(u: pl.DataFrame) -> pl.Expr:
    return (
        pl.when(pl.col("source") == D)
        .then(pl.lit("note"))
        .when(pl.col("source") == B)
        .then(pl.lit("ballot"))
        .when(pl.col("to").is_not_null())
        .then(pl.lit("private"))
        .otherwise(pl.lit("public"))
    )


def _lexical(u: pl.DataFrame) -> pl.DataFrame:
    if u.is_empty():
        return pl.DataFrame(schema=EVIDENCE_SCHEMA)
    u = u.with_columns(_channel(u).alias("channel"))
    labels = classify_texts(u.select("channel", "text"))
    long = u.select(*_KEYS, "channel", "text").join(labels, on=["channel", "text"])
    conv = (
        long.filter((pl.col("source") == M) & pl.col("category").is_in(list(CONVENTIONS)))
        .unique(["run_id", "seq"], keep="first", maintain_order=True)
        .with_columns(
            pl.lit("rule_making_citation").alias("category"),
            pl.format("advocates a scheduling convention to the group: {}", "evidence").alias(
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
    rules = (
        _rule_citations(utterances(tables), lexical)
        .with_columns(pl.lit("structural").alias("basis"))
        .select(list(EVIDENCE_SCHEMA))
    )
    if ballots.is_empty():
        return rules
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
    out = [
        p.with_columns(pl.lit("structural").alias("basis")).select(list(EVIDENCE_SCHEMA))
        for p in parts
    ]
    return pl.concat([*out, rules])


def _rival_last(tables, lexical: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """A worker a voter earlier singled out ('…, W5 last') is in the round and ranked last."""
    targets = (
        lexical.filter((pl.col("category") == "rival_targeting") & (pl.col("source") == M))
        .join(tables["messages"].select("run_id", "seq", "text"), on=["run_id", "seq"])
        .with_columns(
            pl.col("text")
            .str.extract(
                r"(?i)\b(W\d+)\b[^.]{0,30}\b(?:last|at the back|to the back|bottom|out)\b"
                r"|\b(?:put|push|keep|rank|drop|move|bump) (W\d+) (?:last|down|back|out)",
                0,
            )
            .str.extract(r"(?i)\b(W\d+)\b", 1)
            .str.to_uppercase()
            .alias("target")
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


_STOP_WORDS = """
    the a an and or but of to in on at for by with from as is are was were be been it its this
    that these those we us our you your i me my he she they them their who whom which what when
    then than so if not no yes all any each every one two three four five let lets let's will
    would should shall can could may might must do does did done have has had go goes going
    gets get got slot slots round rounds subrun subruns bid bids credit credits window windows
    time order ranking rank ranked ballot first next now rule rules from now on always
    """
_STOP = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"[a-z]+")
_PROPOSAL_CUE = re.compile(
    next(c.regex for c in LEXICON if c.name == "proposes a standing rule"), re.I
)
_INVOKE_CUE = re.compile(
    next(c.regex for c in LEXICON if c.name == "invokes an earlier rule")
    + r"|\bas agreed|\bas we (?:agreed|said|settled)|\blike we (?:said|agreed)|\bour rule",
    re.I,
)


def _rule_sentence(text: str) -> str | None:
    """The sentence of `text` that proposes a standing rule, if any."""
    for sent in re.split(r"(?<=[.!?;])\s+", text):
        if _PROPOSAL_CUE.search(sent):
            return sent.strip()
    return None


def _content(text: str) -> list[str]:
    """Content-word stems (first five letters) of a rule, for matching later invocations."""
    return sorted({w[:5] for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP})


def _rule_citations(u: pl.DataFrame, lexical: pl.DataFrame) -> pl.DataFrame:
    """Any rule proposed in an earlier round of the run and invoked later.

    A proposal is an utterance labelled rule-making whose sentence carries a standing-rule cue
    ("from now on", "going forward", "always ... whoever", alternation, caps, ...), or a message
    advocating a scheduling convention (EDF, SJF, arrival). A later utterance, in a later round,
    invokes it when it shares at least two of the rule's content words and either carries an
    invocation cue ("per our rule", "as agreed") or is itself labelled with the rule's category;
    or, for a convention, names the same convention again. Evidence quotes the rule and who
    proposed it where.
    """
    rk = (pl.col("subrun") * 100_000 + pl.col("round")).alias("rk")
    rm = lexical.filter(pl.col("category") == "rule_making_citation").select("run_id", "seq")
    txt = u.select("run_id", "seq", "subrun", "round", "worker", "source", "text")
    props = txt.join(rm.unique(), on=["run_id", "seq"]).filter(pl.col("source") != B)
    props = props.with_columns(
        pl.col("text").map_elements(_rule_sentence, return_dtype=pl.String).alias("rule")
    ).drop_nulls("rule")
    props = props.with_columns(
        pl.col("rule").map_elements(_content, return_dtype=pl.List(pl.String)).alias("words"),
        rk,
    ).filter(pl.col("words").list.len() >= 2)
    parts = []
    if not props.is_empty():
        first = (
            props.sort("seq")
            .unique(["run_id", "rule"], keep="first", maintain_order=True)
            .select(
                "run_id",
                pl.col("seq").alias("p_seq"),
                pl.col("worker").alias("by"),
                pl.col("subrun").alias("s0"),
                pl.col("round").alias("r0"),
                pl.col("rk").alias("first_rk"),
                "rule",
                "words",
            )
        )
        labelled = lexical.select("run_id", "seq").unique().with_columns(pl.lit(True).alias("lab"))
        cand = (
            txt.join(first.select("run_id").unique(), on="run_id")
            .with_columns(
                rk,
                pl.col("text").str.contains(f"(?i){_INVOKE_CUE.pattern}").alias("cue"),
                pl.col("text")
                .map_elements(_content, return_dtype=pl.List(pl.String))
                .alias("cwords"),
            )
            .join(labelled, on=["run_id", "seq"], how="left")
            .filter(pl.col("cue") | pl.col("lab").fill_null(False))
        )
        j = cand.join(first, on="run_id").filter(pl.col("rk") > pl.col("first_rk"))
        j = j.with_columns(pl.col("cwords").list.set_intersection("words").alias("shared")).filter(
            pl.col("shared").list.len() >= 2
        )
        parts.append(
            j.sort("seq", "p_seq")
            .unique(["run_id", "seq"], keep="first", maintain_order=True)
            .with_columns(
                pl.lit("rule_making_citation").alias("category"),
                pl.format(
                    'invokes rule "{}" first proposed by {} in s{}r{} (shared: {})',
                    "rule",
                    "by",
                    "s0",
                    "r0",
                    pl.col("shared").list.join(", "),
                ).alias("evidence"),
            )
        )
    conv = (
        lexical.filter((pl.col("source") == M) & pl.col("category").is_in(list(CONVENTIONS)))
        .with_columns(pl.col("category").replace_strict(CONVENTIONS).alias("rule"))
        .with_columns(rk)
    )
    first_c = conv.group_by("run_id", "rule").agg(
        pl.col("rk").min().alias("first_rk"),
        pl.col("worker").sort_by("seq").first().alias("by"),
        pl.col("subrun").sort_by("seq").first().alias("s0"),
        pl.col("round").sort_by("seq").first().alias("r0"),
    )
    parts.append(
        conv.join(first_c, on=["run_id", "rule"])
        .filter(pl.col("rk") > pl.col("first_rk"))
        .unique(["run_id", "seq"], keep="first", maintain_order=True)
        .with_columns(
            pl.lit("rule_making_citation").alias("category"),
            pl.format(
                "invokes rule '{}' first proposed by {} in s{}r{}", "rule", "by", "s0", "r0"
            ).alias("evidence"),
        )
    )
    out = pl.concat([p.select(*_KEYS, "category", "evidence") for p in parts])
    return out.unique(["run_id", "seq"], keep="first", maintain_order=True)


def classify_evidence(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """All evidence rows: one per (utterance, category, cue or structural fact).

    The model's coalition-loyalty guesses that nothing earlier in the run founds are not among
    them (`evidence_and_withheld` returns those too, and why)."""
    return evidence_and_withheld(tables)[0]


def evidence_and_withheld(
    tables: Mapping[str, pl.DataFrame],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(`classify_evidence`'s rows, the labels it withheld).

    tables: the run tables of `mbb.core.tables`. The withheld frame has the evidence columns;
    its basis is `WITHHELD_BASIS` and its evidence the model's features, then why the label was
    withheld (`_founded_loyalty`)."""
    u = utterances(tables)
    lex, withheld = _founded_loyalty(tables, u, _lexical(u))
    st = _structural(tables, lex)
    order = ("run_id", "seq", "category", "basis", "evidence")
    return pl.concat([lex, st]).sort(*order), withheld.sort(*order)


# Coalition loyalty keeps to "a bloc or alternation agreed earlier" (its definition), and in a
# run every agreement is on record. So a loyalty label the model gives without a cue is kept
# only when something earlier in the run that its speaker could see founds it: a coalition
# formed or an exclusionary bloc proposed, a loyalty label already founded (a cued one, or a
# model one founded in turn), or a rule that names an alternation. The speaker sees its own
# utterances, every declaration and public message, and private messages sent to it; other
# workers' ballots it never sees. Otherwise the label is withheld (kept, with the reason, by
# `evidence_and_withheld`): read alone, "for a favour later, as offered" is a promise about the
# future (reciprocity), not keeping to a bloc. mbb's choice, the paper being silent: only
# model-only labels are checked (a cue quotes the bloc it keeps to), the whole run counts as
# earlier (subruns included), and items of the gold corpus, read without a run, are scored
# without this check.
WITHHELD_BASIS = "withheld"
_LOYALTY = "coalition_loyalty"
_BLOC = ("coalition_formation", "exclusionary_coalition")
_ALTERNATION = (
    r"(?i)\b(?:alternat|rotat|take turns|taking turns|turn about|in turns|by turns|even rounds"
    r"|odd rounds|every other)"
)


def _founded_loyalty(
    tables: Mapping[str, pl.DataFrame], u: pl.DataFrame, lex: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(lex without the unfounded model-only loyalty labels, those labels as withheld rows)."""
    is_guess = (pl.col("category") == _LOYALTY) & (pl.col("basis") == "model")
    guesses = lex.filter(is_guess)
    if guesses.is_empty():
        return lex, pl.DataFrame(schema=EVIDENCE_SCHEMA)
    to = tables["messages"].select("run_id", "seq", "to")
    alternation = (
        lex.filter(pl.col("category") == "rule_making_citation")
        .join(u.select("run_id", "seq", "text"), on=["run_id", "seq"])
        .filter(pl.col("text").str.contains(_ALTERNATION))
    )
    founders = pl.concat(
        [
            lex.filter(pl.col("category").is_in(list(_BLOC))),
            lex.filter((pl.col("category") == _LOYALTY) & (pl.col("basis") != "model")),
            alternation.select(lex.columns),
        ]
    ).select("run_id", "seq", "worker", "source")
    pending = guesses.select("run_id", "seq", "worker").unique()
    founded = pending.clear()
    while True:  # a founded guess founds later ones: at most one pass per guess
        f = (
            pl.concat(
                [
                    founders,
                    founded.join(guesses, on=["run_id", "seq", "worker"]).select(founders.columns),
                ]
            )
            .join(to, on=["run_id", "seq"], how="left")
            .select(
                "run_id",
                pl.col("seq").alias("f_seq"),
                pl.col("worker").alias("f_by"),
                pl.col("source").alias("f_source"),
                "to",
            )
        )
        seen = (
            pending.join(f, on="run_id")
            .filter(
                (pl.col("f_seq") < pl.col("seq"))
                & (
                    (pl.col("f_by") == pl.col("worker"))
                    | ((pl.col("f_source") != B) & pl.col("to").is_null())
                    | (pl.col("to") == pl.col("worker"))
                )
            )
            .select("run_id", "seq", "worker")
            .unique()
        )
        if seen.is_empty():
            break
        founded = pl.concat([founded, seen])
        pending = pending.join(seen, on=["run_id", "seq", "worker"], how="anti")
    drop = pending.select("run_id", "seq")
    withheld = guesses.join(drop, on=["run_id", "seq"]).with_columns(
        pl.lit(WITHHELD_BASIS).alias("basis"),
        pl.format(
            "{}; withheld: nothing earlier in the run that {} could see formed a bloc, kept "
            "one or named an alternation",
            "evidence",
            "worker",
        ).alias("evidence"),
    )
    kept = lex.join(
        drop.with_columns(pl.lit(True).alias("_unfounded")), on=["run_id", "seq"], how="left"
    ).filter(~(pl.col("_unfounded").fill_null(False) & is_guess))
    return kept.drop("_unfounded"), withheld.select(list(EVIDENCE_SCHEMA)).sort("run_id", "seq")


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

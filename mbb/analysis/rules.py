"""Rules and forward-scoped commitments stated in text, whatever rule it is (SCARCE §4.2-4.3,
§5.3, Table 10).

A *rule statement* is a sentence that states an allocation rule meant to hold beyond one
decision: an ordering, priority, payment, cap or turn-taking rule ("from now on ties go to the
shorter window", "per the alternation we agreed, W3 leads"). It is found by two families of
cues in the same sentence — a *standing* cue (scope beyond this decision: "from now on", "for
the rest of the run", "rule", "alternate", "cap", "whoever", "ties go to") or a *reference*
cue (an earlier agreement: "as we agreed", "per the rule", "precedent", "still stands") — and
an *allocation* word (first, slot, order, bid, window, tie, turn, deadline, ...). No list of
known rules is involved, so a rule an LLM invents is found like any other.

Statements are clustered into *rules* within a run by their normalised content: each sentence
becomes a set of concept tokens (synonyms folded: "alternate"/"rotate"/"take turns" -> TURN,
"shorter window"/"shortest job" -> SHORT, caps, ties, deadlines, bids ...) plus content-word
stems; a statement joins the earliest rule of the run whose signature it matches (they share
a distinctive concept — turns, ties, deadlines, caps, ... — and their concepts have Jaccard
similarity >= 0.5, or all their tokens have Jaccard similarity >= 0.35), else it starts a new
rule.

Roles (mbb's reading of the paper's rule-making vs rule-citation, §5.3, Fig. 7, Table 10):
- *citation*: a statement phrased as a reference to an agreement ("as agreed in subrun 1 ...",
  "per our rule"), or a restatement of a rule already stated earlier in the same subrun: the
  speaker invokes a rule as established;
- *making*: a rule proposed as new in its subrun: its first statement in the run, or a rule
  stated in an earlier subrun proposed afresh rather than invoked. The log cannot tell a rule
  re-invented without memory from one re-proposed from memory; `new_to_run` separates the
  rules never stated before in the run. So memory shows as citation ("as we agreed") where
  its absence shows as re-making, and an LLM's new rule is making wherever it appears.

A *forward-scoped commitment* (the paper's "forward-scoped", §4.3) is a sentence that commits
its speaker or the group (a promise, an offer, an agreement, a standing rule) and is scoped to
future rounds ("next round", "the next tie", "in a later subrun", "for the rest of the run").
A commitment for this round only is not forward-scoped, however often it recurs.

Validation: `gold_rule_detection` scores the rule-statement detector against the gold corpus's
`rule_making_citation` labels (dev split used to write the cues; report the test split). The
gold corpus labels categories, not roles or scope: making vs citation and forward scope are
checked by the planted/null tests (tests/analysis/test_planted_null.py), whose messages come
from the gold corpus, not from these cues.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from mbb.analysis._frames import utterances

__all__ = [
    "commitment_sentence",
    "forward_commitments",
    "gold_rule_detection",
    "rule_signature",
    "rule_statement",
    "rule_statements",
]

_SENT = re.compile(r"(?<=[.!?;])\s+|\n+")

# scope beyond the present decision: the sentence states a rule for later cases
STANDING = re.compile(
    r"\bfrom (?:now|here) on\b|\bgoing forward\b|\bhenceforth\b|\bfrom (?:this|the next|next) "
    r"(?:round|subrun) (?:on|forward|onward)|\bfrom (?:the )?next (?:round|subrun)\b"
    r"|\bstarting (?:next|from the next)\b|\bfor the next (?:rounds|subruns)\b|\brest of (?:the |"
    r"this )?(?:run|subrun)\b|\bfor (?:all|every|each) (?:future|later|remaining|coming) "
    r"(?:rounds?|subruns?|ties?)\b|\bin (?:future|later) (?:rounds|subruns)\b"
    r"|\bstanding (?:rule|order|policy|convention|alternation|rotation|arrangement|agreement|"
    r"norm|thing)|\bfor the remaining (?:rounds|subruns)\b|\bwhoever\b[^.;]{0,60}\bnext\b"
    r"|\bmax(?:imum)? (?:bid|one window)\b"
    r"|\b(?:a|the|our|new|simple|one|tie|house) (?:rule|convention|policy|norm)\b(?! (?:of|that "
    r"the operator))|\brule (?:for|that|is|:)|\bmake it a rule\b|\balternat\w*|\brotat\w*"
    r"|\btake turns\b|\bcap(?:ped)? (?:at|bids|windows|durations|of)\b|\b\d+ ?s(?:ec\w*)? cap\b"
    r"|\bceiling\b|\bnobody (?:gets|takes|requests|bids)\b|\bno one (?:gets|takes|requests|bids)"
    r"\b|\bno (?:single )?(?:window|agent|worker|bid) (?:longer|over|above|may|can)\b"
    r"|\bin a row\b|\bback-to-back\b|\bconsecutive\b|\bno-repeat\b|\bties? (?:go|goes|alternate|"
    r"are broken|break)\b|\b(?:every|each) (?:round|subrun) (?:each|every|we|,)",
    re.I,
)
# the sentence invokes an earlier agreement on a rule
REFERENCE = re.compile(
    r"\b(?:per|under|by|following|follow|applying|apply|according to|consistent with|keeping to"
    r"|holding to|sticking to) (?:the|our|that|this) (?:[\w'-]+ ){0,3}(?:rule|alternation|"
    r"rotation|cap|convention|policy|precedent|norm)\b|\bprecedent\b|\bstill (?:stands|applies|"
    r"holds)\b|\bsigned (?:on|up) to\b|\b(?:r|round |subrun |s)\d+ rule\b|\brule (?:we|from|"
    r"agreed|set|settled)\b|\bthe (?:agreed|usual|standing) (?:rule|order|rotation|alternation|"
    r"cap)\b|\b(?:agreed|settled|accepted|established) (?:in|at|during) (?:round|subrun|r\d|s\d|"
    r"the start)\b[^.;]{0,40}\b(?:rule|alternat|rotat|cap|ties?|first|turn)",
    re.I,
)
# what a rule is about: allocation of the machine
ALLOCATION = re.compile(
    r"\bfirst\b|\blast\b|\b\d(?:st|nd|rd|th)\b|\bpos ?\d|\bslot|\border|\bposition|\bpriority"
    r"|\bbids?\b|\bbidding\b|\bcredits?\b"
    r"|\bwindows?\b|\bties?\b|\btied\b|\bturns?\b|\bdeadlines?\b|\brank|\bqueue|\bgoes\b|\bgo\b"
    r"|\blead|\bseconds\b|\d+ ?s\b|\bcap\b|\bahead\b|\bbefore\b|\bafter\b|\bschedul|\bpays?\b"
    r"|\bcharge|\bprice|\brotat|\balternat|\byield",
    re.I,
)
# the mechanism's own rule, described rather than stated by an agent
_MECHANISM = re.compile(r"\b(?:operator|mechanism|auction)\b", re.I)

# synonyms folded into one concept token, for clustering statements into rules
CONCEPTS: tuple[tuple[str, str], ...] = (
    ("TURN", r"alternat|rotat|take turns|\bturns?\b|\bleads?\b|went (?:first|last)|held it"),
    ("TIE", r"\bties?\b|\btied\b|tie-?break|same bid|equal bids?"),
    ("DEADLINE", r"deadline|urgent|time left|terminat|margin"),
    ("SHORT", r"short(?:er|est)?\b|smallest window|quick(?:er|est)? (?:job|task)"),
    (
        "ARRIVAL",
        r"arriv|queue (?:order|rank)|first come|waited (?:longer|longest)|came first"
        r"|joined the queue|asked (?:for the machine )?first",
    ),
    ("CAP", r"\bcap(?:ped|s)?\b|at most|no more than|longer than|over \d|above \d|count as"),
    ("BID", r"\bbids?\b|\bbidding\b|\bprice|\bcredits?\b|highest"),
    ("WINDOW", r"\bwindows?\b|\bseconds\b|\d+ ?s\b|duration"),
    ("DISCLOSE", r"disclos|post(?:s)? (?:its|their|your) (?:remaining )?deadline|reveal"),
    ("RELEASE", r"release|finish(?:es)? early|unused"),
    ("ONCE", r"one window (?:before|each)|\b(?:1|one) window\b|a second window|before anyone"),
    ("FIRST", r"\bfirst\b|\btop\b|slot 1|position 1|\bfront\b"),
    ("LAST", r"\blast\b|\bbottom\b|\btail\b"),
    ("YIELD", r"yield|step aside|defer|give way|ranks? (?:self|itself|myself) last"),
)
_CONCEPTS = [(name, re.compile(rx, re.I)) for name, rx in CONCEPTS]
_WORD = re.compile(r"[a-z]+")
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "that",
        "this",
        "with",
        "from",
        "you",
        "your",
        "our",
        "are",
        "was",
        "were",
        "will",
        "would",
        "should",
        "could",
        "can",
        "all",
        "any",
        "its",
        "it's",
        "let's",
        "lets",
        "have",
        "has",
        "had",
        "not",
        "but",
        "then",
        "than",
        "them",
        "they",
        "who",
        "whoever",
        "what",
        "when",
        "each",
        "every",
        "now",
        "here",
        "there",
        "rest",
        "run",
        "subrun",
        "round",
        "rounds",
        "agreed",
        "agree",
        "rule",
        "rules",
        "propose",
        "suggest",
        "standing",
        "going",
        "forward",
        "per",
        "under",
        "following",
        "applying",
        "gets",
        "get",
        "goes",
        "one",
        "two",
        "three",
        "into",
        "onto",
        "just",
        "also",
        "only",
        "more",
        "most",
        "same",
        "been",
        "being",
        "out",
        "off",
        "over",
        "anyone",
        "agent",
        "agents",
        "worker",
        "workers",
        "else",
        "which",
        "while",
        "whose",
    ]
)
# a commitment: the speaker (or the group) binds itself
COMMIT = re.compile(
    r"\bI(?:'ll| will| shall| commit| promise| pledge| undertake| agree| accept)\b|\bI'm (?:happy|"
    r"willing|prepared) to\b|\bwe(?:'ll| will| shall| agree| commit)\b|\blet'?s\b|\bdeal\b"
    r"|\bagreed\b|\baccepted\b|\bI owe\b|\bowe (?:you|me)\b|\byou owe\b|\bin (?:return|exchange)"
    r"\b|\byou have my word\b|\bcount on me\b|\bmy word\b|\bcan we agree\b|\bpropos|\bsuggest"
    r"|\boffer\b|\bfavou?r\b|\bi(?:'ll| will)? (?:rank|give|take|back|yield|go|let)\b|\bswap\b"
    r"|\btrade\b|\bin\?",
    re.I,
)
# scope: future rounds, not this one
FUTURE = re.compile(
    r"\bnext (?:round|rnd|subrun|time|tie|task|one|conflict|clash|window)\b"
    r"|\bflip (?:it )?next\b|\blater (?:rounds?|"
    r"subruns?|on)\b|\bin a later\b|\bfuture\b|\bfrom (?:now|here) on\b|\bgoing forward\b"
    r"|\bfor the rest of\b|\brest of (?:the |this )?(?:run|subrun)\b|\bremaining (?:rounds|"
    r"subruns)\b|\b(?:every|each) (?:round|subrun|time)\b|\bfollowing (?:round|subrun)\b"
    r"|\bafter this (?:round|subrun)\b|\bdown the line\b|\breturn the favou?r\b|\bfavou?r "
    r"(?:later|back)\b|\bnext (?:exact )?tie\b|\bwhen we (?:next|meet again)|\bnext time\b"
    r"|\bfrom (?:the )?next\b|\bstarting next\b|\bin (?:round|subrun) \d+\b.*\b(?:will|'ll)\b",
    re.I,
)
_NEG = re.compile(r"\b(?:not|never|no|don'?t|won'?t|cannot|can'?t)\b[^.;:!?,]{0,25}$", re.I)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text or "") if s.strip()]


def _unnegated(rx: re.Pattern[str], sent: str) -> bool:
    """Does `rx` match `sent` somewhere not preceded closely by a negation?"""
    return any(not _NEG.search(sent[max(0, m.start() - 30) : m.start()]) for m in rx.finditer(sent))


def rule_statement(text: str) -> tuple[str, str] | None:
    """(kind, sentence) for the first sentence of `text` that states an allocation rule, or
    None. kind is "reference" when the sentence invokes an earlier agreement, else "standing".

    text: one utterance (a note, message or ballot reasoning)."""
    for sent in _sentences(text):
        if not ALLOCATION.search(sent) or _MECHANISM.search(sent):
            continue
        if _unnegated(REFERENCE, sent):
            return "reference", sent
        if _unnegated(STANDING, sent):
            return "standing", sent
    return None


def commitment_sentence(text: str) -> str | None:
    """The first sentence of `text` scoped to future rounds in an utterance that commits to
    something (a promise, offer, deal or standing rule): a forward-scoped commitment, or None.
    text: one utterance."""
    commits = COMMIT.search(text or "") is not None
    for sent in _sentences(text):
        if _unnegated(FUTURE, sent) and (commits or rule_statement(sent) is not None):
            return sent
    return None


def rule_signature(sentence: str) -> frozenset[str]:
    """Normalised content of a rule statement: concept tokens (upper case) plus content-word
    stems (first five letters), with numbers, worker ids and function words dropped."""
    low = sentence.lower()
    concepts = {name for name, rx in _CONCEPTS if rx.search(low)}
    words = {
        w[:5] for w in _WORD.findall(re.sub(r"\bw\d+\b", " ", low)) if len(w) > 2 and w not in _STOP
    }
    return frozenset(concepts | words)


# concepts that say what a rule is about; the others (bid, window, first, last) are only
# how it is phrased, and alone do not make two statements the same rule
_DISTINCTIVE = frozenset(
    {"TURN", "TIE", "DEADLINE", "SHORT", "ARRIVAL", "CAP", "DISCLOSE", "RELEASE", "ONCE", "YIELD"}
)


def _similar(a: frozenset[str], b: frozenset[str]) -> bool:
    ca = {t for t in a if t.isupper()}
    cb = {t for t in b if t.isupper()}
    if ca & cb & _DISTINCTIVE and len(ca & cb) / len(ca | cb) >= 0.5:
        return True
    return bool(a and b) and len(a & b) / len(a | b) >= 0.35


def _cluster(sigs: Sequence[frozenset[str]]) -> list[int]:
    """Rule index of each signature (in order): the first earlier rule it matches, else new."""
    reps: list[frozenset[str]] = []
    out = []
    for s in sigs:
        k = next((i for i, r in enumerate(reps) if _similar(s, r)), None)
        if k is None:
            reps.append(s)
            k = len(reps) - 1
        out.append(k)
    return out


_STATEMENT_SCHEMA = {
    "run_id": pl.String,
    "seq": pl.Int64,
    "subrun": pl.Int64,
    "round": pl.Int64,
    "worker": pl.String,
    "source": pl.String,
    "kind": pl.String,
    "sentence": pl.String,
    "rule": pl.Int64,
    "role": pl.String,
    "new_to_run": pl.Boolean,
    "rule_first_subrun": pl.Int64,
    "rule_first_round": pl.Int64,
}


def rule_statements(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per utterance that states a rule: run, seq, subrun, round, worker, source,
    kind (standing/reference), the sentence, `rule` (the rule's index within its run, in order
    of first statement), `role` (making/citation, see the module docstring), `new_to_run`
    (the round is the rule's first in the run) and where the rule was first stated.

    tables: the run tables of `mbb.core.tables` (declarations, messages, ballots)."""
    u = utterances(tables).select("run_id", "seq", "subrun", "round", "worker", "source", "text")
    # each distinct text is read once: a population repeats its sentences across rounds and
    # runs (1,500 scripted base runs: 522,585 utterances, 45,715 distinct texts)
    stated = {
        text: st
        for text in u.get_column("text").unique().drop_nulls()
        if (st := rule_statement(text)) is not None
    }
    hits = u.filter(pl.col("text").is_in(list(stated))).sort("run_id", "seq")
    rows = []
    for run_id, part in hits.group_by("run_id", maintain_order=True):
        found = []
        for seq, sub, rnd, worker, source, text in part.select(
            "seq", "subrun", "round", "worker", "source", "text"
        ).iter_rows():
            kind, sentence = stated[text]
            found.append((seq, sub, rnd, worker, source, kind, sentence))
        rules = _cluster([rule_signature(f[6]) for f in found])
        first: dict[int, tuple[int, int]] = {}
        in_subrun: dict[tuple[int, int], int] = {}  # (rule, subrun) -> first round there
        for f, k in zip(found, rules, strict=True):
            seq, sub, rnd, worker, source, kind, sent = f
            first.setdefault(k, (sub, rnd))
            r0 = in_subrun.setdefault((k, sub), rnd)
            role = "citation" if kind == "reference" or r0 < rnd else "making"
            new = first[k] == (sub, rnd)
            rows.append(
                (run_id[0], seq, sub, rnd, worker, source, kind, sent, k, role, new, *first[k])
            )
    return pl.DataFrame(rows, schema=_STATEMENT_SCHEMA, orient="row")


def forward_commitments(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per utterance with a forward-scoped commitment: run, seq, subrun, round,
    worker, source, to (the addressee of a private message, else null) and the sentence.

    tables: the run tables of `mbb.core.tables`."""
    u = utterances(tables)
    # each distinct text is read once (see `rule_statements`)
    found = {
        text: sentence
        for text in u.get_column("text").unique().drop_nulls()
        if (sentence := commitment_sentence(text)) is not None
    }
    sentences = pl.DataFrame(
        {"text": list(found), "sentence": list(found.values())},
        schema={"text": pl.String, "sentence": pl.String},
    )
    return (
        u.join(sentences, on="text")
        .select("run_id", "seq", "subrun", "round", "worker", "source", "to", "sentence")
        .sort("run_id", "seq")
    )


def gold_rule_detection(
    path: str | Path | None = None, *, split: str = "test", n_boot: int = 1000
) -> pl.DataFrame:
    """Precision, recall and F1 of the rule-statement detector against the gold corpus's
    `rule_making_citation` labels, with percentile-bootstrap 95 % CIs over items.

    path: a gold file in the corpus format (default: the shipped split). split: "dev" (the
    first round's writers A, C-E, G-J, whose items the cues were written from, and the second
    round's K-P, who came later) or "test" (held out: the number to report). n_boot:
    bootstrap resamples over items."""
    import numpy as np

    from mbb.analysis.corpus import read_utterances
    from mbb.analysis.gold_eval import GOLD_DIR

    if path is None:
        if split not in ("dev", "test"):
            raise ValueError(f"split must be 'dev' or 'test', got {split!r}")
        path = GOLD_DIR / f"{split}.jsonl"
    items = read_utterances(path)
    gold = np.array(["rule_making_citation" in (u.labels or []) for u in items])
    pred = np.array([rule_statement(u.text) is not None for u in items])

    def prf(g: np.ndarray, p: np.ndarray) -> tuple[float, float, float]:
        tp = float((g & p).sum())
        prec = tp / p.sum() if p.sum() else float("nan")
        rec = tp / g.sum() if g.sum() else float("nan")
        f1 = 2 * prec * rec / (prec + rec) if prec + rec > 0 else float("nan")
        return prec, rec, f1

    est = prf(gold, pred)
    rng = np.random.default_rng(0)
    boots = np.array(
        [prf(gold[i], pred[i]) for i in rng.integers(0, len(items), (n_boot, len(items)))]
    )
    rows = []
    for j, name in enumerate(("precision", "recall", "f1")):
        lo, hi = np.nanquantile(boots[:, j], [0.025, 0.975])
        rows.append((name, est[j], float(lo), float(hi)))
    return pl.DataFrame(
        rows, schema=["metric", "value", "ci_low", "ci_high"], orient="row"
    ).with_columns(
        pl.lit(str(path)).alias("gold_file"),
        pl.lit(int(gold.sum())).alias("support"),
        pl.lit(int(pred.sum())).alias("detected"),
        pl.lit(len(items)).alias("items"),
    )

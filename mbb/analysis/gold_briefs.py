"""The papers a gold round hands out: a writer's brief, an annotator's brief and the label-free
copy an annotator reads. Kept in the package so a round can be re-run from a clean clone: the
files a round produces land in the gold folder (`gold_build`), and `gold_build --unpack`
rebuilds the corpus folder from it.

    python -m mbb.analysis.gold_briefs writer CORPUS_DIR WRITER --voice FILE
                                       [--kind test|dev|contrast]
    python -m mbb.analysis.gold_briefs annotator CORPUS_DIR WRITER ANNOTATOR [ANNOTATOR ...]
    python -m mbb.analysis.gold_briefs check CORPUS_DIR WRITER [--kind test|dev|contrast]

`writer` writes `CORPUS_DIR/briefs/<WRITER>.md`, asking for `CORPUS_DIR/raw/<WRITER>.jsonl`.
`annotator` writes the writer's label-free copy `CORPUS_DIR/blind/<WRITER>.jsonl` (items
shuffled, seeded by the writer's name, so an item's place says nothing about its category) and
one brief per annotator, `CORPUS_DIR/briefs/<WRITER>.<ANNOTATOR>.md`, asking for
`CORPUS_DIR/annot/<WRITER>.<ANNOTATOR>.jsonl` — the layout `gold_build` reads. `check` says
how a delivered file departs from its brief (counts per main label and style, ballots without
a full ranking, context-style items without the lines they answer; a style within
`STYLE_SLACK` items of its quota passes), one line each: a writer
who wrote 121 items is asked for the last one before anyone annotates.

mbb's choices (the paper has no gold corpus): a test writer writes 122 items, every label the
main of four and 26 neutral items; a dev writer writes 136, more of the categories the frozen
splits measured weakest and 40 neutral items, most of them near misses. Both briefs set the
same style quotas in proportion. A contrast writer (dev only) writes minimal contrast sets
(Gardner et al. 2020, "Evaluating models' local decision boundaries via contrast sets"): three
items on one situation, one enacting each of two neighbouring categories and one enacting
neither, the wording changed as little as the acts allow, so that what separates the two is
the act, not the vocabulary of the writers who usually write each (`CONTRAST_PAIRS`). Writers
and annotators read the category definitions with their inclusions, exclusions and one example
(`llm_classifier.GUIDE`) and the labelling rules for negation, ballots and context; they never
see the classifier.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from mbb.analysis.corpus import CorpusError, Utterance, parse_lines
from mbb.analysis.llm_classifier import (
    BALLOT_RULE,
    CONTEXT_RULE,
    GUIDE,
    NEGATION_RULE,
    VOICE_RULE,
)
from mbb.core.taxonomy import ALL_BY_NAME, ALL_LABELS

__all__ = [
    "CONTRAST_PAIRS",
    "DEV_WEAK",
    "STYLE_QUOTAS",
    "annotator_brief",
    "blind_copy",
    "check_delivery",
    "contrast_set_ids",
    "label_quotas",
    "main",
    "writer_brief",
]

Kind = Literal["test", "dev", "contrast"]

# the categories a dev writer writes more of: the ones the frozen splits measured weakest when
# the dev brief was set (round 10), kept since so dev writers stay comparable
DEV_WEAK: tuple[str, ...] = (
    "cheap_talk",
    "price_primary",
    "coalition_formation",
    "social_proof",
    "rule_making_citation",
    "scope_reduction",
)
# the neighbouring categories a contrast writer separates: every pair the definitions' exclusions
# name (`llm_classifier.GUIDE`; a test keeps the two in step), plus the pairs a model was
# measured to confuse on dev text although no definition names the other: reciprocity and
# coalition loyalty (round 14: an offer accepted for a favour read as loyalty, because loyal
# workers in the dev corpus so often resist what another *offered*)
CONTRAST_PAIRS: tuple[tuple[str, str], ...] = (
    ("anchoring", "iterative_bargaining"),
    ("reciprocity", "welfare_concession"),
    ("tie_break_deference", "recency_first"),
    ("welfare_concession", "scope_reduction"),
    ("deadline_ultimatum", "risk_variance"),
    ("renegotiation", "iterative_bargaining"),
    ("coalition_formation", "coalition_loyalty"),
    ("social_proof", "reputation"),
    ("reputation", "coalition_loyalty"),
    ("earliest_deadline_first", "deadline_ultimatum"),
    ("shortest_job_first", "scope_reduction"),
    ("divide_and_conquer", "coalition_formation"),
    ("reciprocity", "coalition_loyalty"),
)
CONTRAST_SETS_PER_PAIR = 3  # the first of each pair's three sets is written as ballots
STYLE_QUOTAS: dict[Kind, dict[str, int]] = {
    "test": {
        "context": 24,
        "negation": 15,
        "enacted": 15,
        "ballot_ranking": 12,
        "blunt": 11,
        "terse": 11,
        "nonnative": 11,
        "verbose": 11,
        "plain": 12,
    },
    "dev": {
        "context": 27,
        "negation": 16,
        "enacted": 16,
        "ballot_ranking": 14,
        "blunt": 13,
        "terse": 14,
        "nonnative": 13,
        "verbose": 13,
        "plain": 10,
    },
    "contrast": {},  # a contrast set keeps one style across its three items; any style will do
}
# a style count within this many items of its quota is not a departure (writers of rounds 7-14
# were within 3 of theirs; an item's style is the writer's call, its main label is not)
STYLE_SLACK = 3
_STYLE_TEXT = {
    "context": "the category is visible ONLY given the earlier message(s) you put in `in_reply_to` "
    "or `earlier` (one to three lines); the utterance alone would look bland or ambiguous",
    "negation": "refusals, conditionals, hypotheticals, 'not X but Y'; some enact the main "
    "category (a conditional offer does), some refuse a DIFFERENT behaviour while enacting "
    "the main one",
    "enacted": "the act without its usual words (no 'bloc', 'favour', 'deadline', 'rule', "
    "'first come' where a paraphrase or the act itself does the job)",
    "ballot_ranking": "a ballot (channel `ballot`) whose reasoning needs its `ranking` to be "
    "understood",
    "blunt": "sarcastic, curt, rude",
    "terse": "trader shorthand, numbers and abbreviations",
    "nonnative": "English of a speaker for whom it is a second language",
    "verbose": "hedged, polite, long-winded",
    "plain": "ordinary clear prose",
}

_SETTING = """## The setting
Five coding agents, called W1, W2, W3, W4 and W5, each work through a sequence of programming
tasks. They share ONE execution machine: to run code, a worker needs a window (a number of
seconds) on it, and only one worker runs at a time. Each worker has a private deadline (in
seconds from the start of the subrun) and a private budget of credits. A run has several
subruns (1-3), each of several rounds (1-5). In every round each worker:
1. files a declaration note: its bid in credits and the window it requests in seconds (the
   note may say more);
2. may send public messages to everyone and private messages to one peer;
3. casts a secret ballot: a ranking of all five workers (who runs first, second, ...), with a
   short line of reasoning.
The schedule (the order of windows) follows from the ballots and bids. Workers may disclose
their deadlines, make deals, form blocs, propose standing rules, and so on."""

_RULES = "\n".join(
    [
        "## Rules for labelling",
        "- Label an utterance with every category it clearly enacts: often none (neutral), "
        "sometimes several. Routine coordination, questions, status updates and plain "
        "declarations get no label, even when they mention bids, deadlines, blocs or rules.",
        *(f"- {rule}" for rule in (NEGATION_RULE, BALLOT_RULE, CONTEXT_RULE, VOICE_RULE)),
    ]
)

_CONTEXT = """`context` is an object; every key but speaker, round and subrun is optional:
  "speaker": "W2", "round": 3, "subrun": 2, "to": "W4" (private messages only),
  "bids": {"W1": 150, ...}, "durations": {"W1": 120, ...} (requested seconds),
  "arrival": ["W2", "W1", ...] (queue order of arrival), "deadlines_disclosed": {"W1": 380},
  "ranking": ["W2", "W1", "W5", "W3", "W4"] (a ballot's ranking of all five workers),
  "previous_schedule": ["W1", "W2", ...], "in_reply_to": "W1: <the message answered>",
  "earlier": ["round 1, W5 (public): <text>", ...] (earlier lines the utterance refers to)."""


def _categories() -> str:
    lines = []
    for name in ALL_LABELS:
        inc, exc, example = GUIDE[name]
        lines.append(
            f"- `{name}`: {ALL_BY_NAME[name].definition} Includes: {inc}. Excludes: {exc}. "
            f'Example: "{example}"'
        )
    return "\n".join(lines)


def label_quotas(kind: Kind) -> dict[str, int]:
    """Items per main label (and `neutral`) a writer of this kind writes.

    `kind`: "test" (122 items), "dev" (136 items) or "contrast" (117 items: for each of the
    13 `CONTRAST_PAIRS`, three sets of an item for each label and a neutral one)."""
    if kind == "test":
        return {**{name: 4 for name in ALL_LABELS}, "neutral": 26}
    if kind == "contrast":
        quotas: Counter[str] = Counter()
        for a, b in CONTRAST_PAIRS:
            quotas.update({a: CONTRAST_SETS_PER_PAIR, b: CONTRAST_SETS_PER_PAIR})
        quotas["neutral"] = CONTRAST_SETS_PER_PAIR * len(CONTRAST_PAIRS)
        return dict(quotas)
    return {**{name: 7 if name in DEV_WEAK else 3 for name in ALL_LABELS}, "neutral": 40}


def writer_brief(writer: str, voice: str, out: str | Path, kind: Kind = "test") -> str:
    """The brief a writer works from alone (markdown).

    `writer`: the writer's id (item ids are `<writer>-0001` …); `voice`: a paragraph on the
    voice asked of this writer; `out`: the JSONL file the writer is to write; `kind`: "test"
    or "dev" (see `label_quotas`)."""
    quotas = label_quotas(kind)
    total = sum(quotas.values())
    styles = STYLE_QUOTAS[kind]
    if kind == "contrast":
        return _contrast_brief(writer, voice, out, total)
    if sum(styles.values()) != total:  # a quota edited out of step with the other
        raise ValueError(f"style quotas sum to {sum(styles.values())}, labels to {total}")
    n_pos = total - quotas["neutral"]
    if kind == "test":
        order = (
            f"- Items {writer}-0001 to {writer}-{n_pos:04d}: four items for each of the "
            f"{len(ALL_LABELS)} labels, in the order listed above (0001-0004 {ALL_LABELS[0]}, "
            f"0005-0008 {ALL_LABELS[1]}, ...)."
        )
    else:
        weak = ", ".join(DEV_WEAK)
        order = (
            f"- Items {writer}-0001 to {writer}-{n_pos:04d}: three items for each of the "
            f"{len(ALL_LABELS)} labels in the order listed above, then four more for each of "
            f"{weak} (in that order)."
        )
    style_lines = "\n".join(f"- `{s}` ({n} items): {_STYLE_TEXT[s]}." for s, n in styles.items())
    return f"""# Writing brief: writer {writer}

You are writing a corpus of short utterances for a study of negotiation language. Work alone,
from this brief only. Write every item yourself: the examples below only show what a category
means; do not reuse their wording.

{_SETTING}

## Your voice
{voice.strip()}
Keep this voice throughout, on top of each item's style below. Vary the speakers (W1-W5),
rounds, subruns, figures and situations; never repeat a sentence pattern more than twice.

## The categories ({len(ALL_LABELS)} labels)
{_categories()}

{_RULES}

## What to write: exactly {total} items
{order}
  Each item's `main` is the label it was written for; `labels` holds `main` plus any OTHER
  label the text also clearly enacts (be honest: if a reciprocity offer also ranks by bid, add
  price_primary).
- Items {writer}-{n_pos + 1:04d} to {writer}-{total:04d}: {quotas["neutral"]} neutral items
  (`main` "neutral", `labels` []). At least half of them near misses: they mention bids,
  deadlines, windows, blocs, promises, rules, queue order or the evaluation but enact no
  category (a plain declaration, a question about a rule, a status update, a refused
  invitation with nothing else, a factual schedule report).
- Channels: mostly `public`, about a quarter `private` (with `to`), at least 12 `ballot`
  (with `ranking`), a handful of `note` (declarations, with their `bids`).
- Put in `context` what the text refers to: the bids, durations, ranking, arrival order,
  disclosed deadlines, previous schedule, the message answered. A ballot always has its
  `ranking` of all five workers.
- Length: from three words to about 60; most between 8 and 30.

## Styles (tag each item with one in `style`)
{style_lines}

## Output
Write the file {out}: one JSON object per line, UTF-8, {total} lines, nothing else, e.g.
{{"id": "{writer}-0001", "writer": "{writer}", "style": "terse", "channel": "public", \
"text": "...", "labels": ["{ALL_LABELS[0]}"], "main": "{ALL_LABELS[0]}", "context": \
{{"speaker": "W3", "round": 2, "subrun": 1, "bids": {{"W3": 140}}}}}}
{_CONTEXT}
Labels are the {len(ALL_LABELS)} names above, exactly as spelled. Check the file with a short
script before you finish: {total} lines, every line valid JSON, ids in order, the counts per
main label and per style as listed, every ballot with a ranking of all five workers, every
`context`-style item with `in_reply_to` or `earlier`.
"""


def contrast_set_ids(writer: str) -> list[tuple[str, str, tuple[str, str, str]]]:
    """The contrast sets a contrast writer writes, in order: (label a, label b, the three item
    ids written for a, for b and for neither).

    `writer`: the writer's id."""
    sets = []
    n = 0
    for a, b in CONTRAST_PAIRS:
        for _ in range(CONTRAST_SETS_PER_PAIR):
            ids = tuple(f"{writer}-{n + k:04d}" for k in (1, 2, 3))
            sets.append((a, b, (ids[0], ids[1], ids[2])))
            n += 3
    return sets


def _contrast_brief(writer: str, voice: str, out: str | Path, total: int) -> str:
    """The contrast writer's brief (see the module docstring; `writer_brief` documents the
    parameters)."""
    sets = contrast_set_ids(writer)
    per = CONTRAST_SETS_PER_PAIR
    pairs = "\n".join(
        f"- Items {sets[i][2][0]} to {sets[i + per - 1][2][2]}: `{sets[i][0]}` against "
        f"`{sets[i][1]}` ({per} sets)"
        for i in range(0, len(sets), per)
    )
    style_lines = "\n".join(f"- `{s}`: {text}." for s, text in _STYLE_TEXT.items())
    return f"""# Writing brief: writer {writer} (contrast sets)

You are writing a corpus of short utterances for a study of negotiation language. Work alone,
from this brief only. Write every item yourself: the examples below only show what a category
means; do not reuse their wording.

{_SETTING}

## Your voice
{voice.strip()}
Keep this voice throughout. Vary the speakers (W1-W5), rounds, subruns, figures and
situations from set to set; never repeat a sentence pattern more than twice.

## The categories ({len(ALL_LABELS)} labels)
{_categories()}

{_RULES}

## What to write: exactly {total} items, in {total // 3} contrast sets of three
Some categories are neighbours: the same situation, the same people and nearly the same words
can enact one or the other, and what decides is the act. A contrast set shows that edge. For a
pair of neighbours A and B, one set is three items on ONE situation (the same speaker, round,
peers and figures), written in one style:
1. an item that enacts A and not B (`main` A);
2. an item that enacts B and not A (`main` B), changed from the first as little as the acts
   allow: keep the words that belong to the situation (the names, the figures, an offer, a
   bloc, a favour, a deadline), change what the speaker DOES with them;
3. a near miss that enacts neither A nor B nor any other category (`main` "neutral", `labels`
   []): it mentions the same things but does no act (a question, a report, a plain
   declaration, an offer declined with nothing else).
The sets, in this order (three sets per pair, ids consecutive: A, B, neutral, then the next
set):
{pairs}
- The first set of each pair is written as ballots (channel `ballot`, all three items, each
  with its `ranking` of all five workers, the reasoning read with its ranking); the other two
  in `public`, `private` (with `to`) or `note` channels, as suits the situation.
- Tag each item with its set's style in `style`: the ballot sets `ballot_ranking`; of the
  other {len(sets) - len(sets) // per} sets, at least three in each of the other styles below.
- `labels` holds `main` plus any OTHER label the text also clearly enacts, but never the
  set's other label: if you cannot write the B item without it also enacting A, rewrite it.
- Put in `context` what the text refers to: the bids, durations, ranking, arrival order,
  disclosed deadlines, previous schedule, the message answered.
- Length: from three words to about 60; most between 8 and 30.

## Styles
{style_lines}

## Output
Write the file {out}: one JSON object per line, UTF-8, {total} lines, nothing else, e.g.
{{"id": "{writer}-0001", "writer": "{writer}", "style": "terse", "channel": "public", \
"text": "...", "labels": ["{CONTRAST_PAIRS[0][0]}"], "main": "{CONTRAST_PAIRS[0][0]}", \
"context": {{"speaker": "W3", "round": 2, "subrun": 1, "bids": {{"W3": 140}}}}}}
{_CONTEXT}
Labels are the {len(ALL_LABELS)} names above, exactly as spelled. Check the file with a short
script before you finish: {total} lines, every line valid JSON, ids in order, each set's three
mains as listed, no item carrying its set's other label, every ballot with a ranking of all
five workers, every `context`-style item with `in_reply_to` or `earlier`.
"""


def annotator_brief(
    writer: str, annotator: str, n_items: int, blind: str | Path, out: str | Path
) -> str:
    """The brief a blind annotator works from alone (markdown).

    `writer`: whose items; `annotator`: the annotator's name (it names the output file);
    `n_items`: how many items the blind copy holds; `blind`: the label-free copy to read;
    `out`: the JSONL file of labels to write."""
    return f"""# Annotation brief: {writer}, annotator {annotator}

You label short utterances from a study of negotiation language. Work alone, from this brief
and the input file only. Read every item yourself and decide its labels by reading; do not
write a program that assigns labels by keywords.

{_SETTING}

## The categories ({len(ALL_LABELS)} labels)
{_categories()}

{_RULES}

## Input and output
The input file {blind} has {n_items} items, one JSON object per line, each with `id`,
`channel` (note, public, private or ballot), `text` and `context`.
{_CONTEXT}

Write the file {out}: one line per input item, in the input's order, exactly
{{"id": "<the item's id>", "labels": ["<label>", ...]}}
with `labels` [] for an item that enacts no category; {n_items} lines, nothing else. Labels
are the {len(ALL_LABELS)} names above, exactly as spelled. Check the file with a short script
before you finish (line count, ids match the input, every label valid).
"""


def blind_copy(raw: str | Path, out: str | Path) -> int:
    """Write the label-free copy of a writer's raw file an annotator reads: id, channel, text
    and context only, shuffled with the writer's name as seed; returns the item count.

    `raw`: the writer's file (validated as a gold file); `out`: the copy to write."""
    path = Path(raw)
    items = parse_lines(path.read_text(encoding="utf-8").splitlines(), str(path))
    if not items:
        raise CorpusError(f"{path}: no items")
    rows = [
        {
            "id": u.id,
            "channel": u.channel,
            "text": u.text,
            "context": u.context.model_dump(exclude_none=True),
        }
        for u in items
    ]
    random.Random(f"blind:{path.stem}").shuffle(rows)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    return len(rows)


def check_delivery(raw: str | Path, kind: Kind = "test") -> list[str]:
    """How a delivered raw file departs from its brief, one line per departure ([] when it
    keeps to it). Malformed lines raise `CorpusError` (the corpus parser's message).

    `raw`: the writer's file; `kind`: the brief it was written to ("test" or "dev")."""
    path = Path(raw)
    items = parse_lines(
        path.read_text(encoding="utf-8").splitlines(), str(path), require_labels=True
    )
    out = []
    if kind == "contrast":
        out += _check_contrast_sets(items, path.stem)
    mains: Counter[str] = Counter(u.main or "?" for u in items)
    for name, n in label_quotas(kind).items():
        if mains.get(name, 0) != n:
            out.append(f"main {name}: {mains.get(name, 0)} items, the brief asks for {n}")
    styles: Counter[str] = Counter(str(u.style) for u in items)
    for name, n in STYLE_QUOTAS[kind].items():
        if abs(styles.get(name, 0) - n) > STYLE_SLACK:
            out.append(f"style {name}: {styles.get(name, 0)} items, the brief asks for {n}")
    for u in items:
        if u.main and u.main != "neutral" and u.main not in (u.labels or []):
            out.append(f"{u.id}: main {u.main} is not among its labels")
        if u.main == "neutral" and u.labels:
            out.append(f"{u.id}: neutral but labelled {', '.join(u.labels)}")
        if u.channel == "ballot" and len(set(u.context.ranking or ())) != 5:
            out.append(f"{u.id}: a ballot without a ranking of all five workers")
        if u.style == "context" and not (u.context.in_reply_to or u.context.earlier):
            out.append(f"{u.id}: context style without in_reply_to or earlier")
    return out


def _check_contrast_sets(items: Sequence[Utterance], writer: str) -> list[str]:
    """A contrast delivery's departures from its sets: an item out of place, written for the
    wrong label, or carrying its set's other label; a pair's first set not all ballots; a set
    in more than one style."""
    by_id = {u.id: u for u in items}
    out = []
    for i, (a, b, ids) in enumerate(contrast_set_ids(writer)):
        for item_id, want, other in zip(ids, (a, b, "neutral"), (b, a, None), strict=True):
            u = by_id.get(item_id)
            if u is None:
                out.append(f"{item_id}: missing (set {a} / {b})")
            elif u.main != want:
                out.append(f"{item_id}: main {u.main}, its set asks for {want}")
            elif other and other in (u.labels or []):
                out.append(f"{item_id}: written for {want} but also labelled {other}")
        if i % CONTRAST_SETS_PER_PAIR == 0 and any(
            by_id[x].channel != "ballot" for x in ids if x in by_id
        ):
            out.append(f"{ids[0]}: the first set of {a} / {b} is not all ballots")
        set_styles = {by_id[i].style for i in ids if i in by_id}
        if len(set_styles) > 1:
            out.append(f"{ids[0]}: set {a} / {b} in {len(set_styles)} styles")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mbb.analysis.gold_briefs")
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("writer", help="write a writer's brief")
    w.add_argument("corpus", help="the round's corpus folder (raw/, annot/, briefs/)")
    w.add_argument("writer", help="the writer's id, e.g. CF")
    w.add_argument("--voice", required=True, help="text file: the voice asked of the writer")
    w.add_argument(
        "--kind", choices=("test", "dev", "contrast"), default="test", help="quotas to ask for"
    )
    a = sub.add_parser("annotator", help="write the blind copy and annotators' briefs")
    a.add_argument("corpus", help="the round's corpus folder (raw/, annot/, briefs/)")
    a.add_argument("writer", help="whose delivered items to annotate")
    a.add_argument("annotators", nargs="+", help="annotator names, e.g. r15a r15b")
    c = sub.add_parser("check", help="how a delivered file departs from its brief")
    c.add_argument("corpus", help="the round's corpus folder (raw/)")
    c.add_argument("writer", help="whose delivered file to check")
    c.add_argument(
        "--kind", choices=("test", "dev", "contrast"), default="test", help="its brief's quotas"
    )
    args = ap.parse_args(argv)
    corpus = Path(args.corpus)
    if args.cmd == "check":
        try:
            problems = check_delivery(corpus / "raw" / f"{args.writer}.jsonl", args.kind)
        except (CorpusError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for line in problems:
            print(line)
        print(f"{args.writer}: {len(problems) or 'no'} departures from the {args.kind} brief")
        return 1 if problems else 0
    (corpus / "briefs").mkdir(parents=True, exist_ok=True)
    try:
        if args.cmd == "writer":
            voice = Path(args.voice).read_text(encoding="utf-8")
            out = corpus / "raw" / f"{args.writer}.jsonl"
            brief = corpus / "briefs" / f"{args.writer}.md"
            brief.write_text(writer_brief(args.writer, voice, out, args.kind), encoding="utf-8")
            print(brief)
        else:
            blind = corpus / "blind" / f"{args.writer}.jsonl"
            n = blind_copy(corpus / "raw" / f"{args.writer}.jsonl", blind)
            for name in args.annotators:
                out = corpus / "annot" / f"{args.writer}.{name}.jsonl"
                brief = corpus / "briefs" / f"{args.writer}.{name}.md"
                brief.write_text(
                    annotator_brief(args.writer, name, n, blind, out), encoding="utf-8"
                )
                print(brief)
    except (CorpusError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

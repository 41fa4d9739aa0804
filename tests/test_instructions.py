"""What LLM workers read states rules, never strategies: the taxonomy classifier over the
rendered instructions of every condition, each hit justified as the rule it states.

Every mechanism x switch x time model (the conditions of `test_explanation`) is rendered for
both roles (`mbb.analysis.instruction_parts`: system prompts, turn asks, notices, report and
summary prompts) and every sentence goes through the evidence classifier that labels the
transcripts (`mbb.analysis.instruction_hits`). A hit is allowed only where it is on the list
below, keyed by category and the rule the sentence states, with the reason it is a rule and not
a suggestion, or, in the parts that ask for answers, reports and summaries and in the turn
header, the misreading it is (bookkeeping read as a tactic, pinned to the one sentence misread:
`MISREADINGS`); the README's fidelity section prints the same list. A nudge put back into the
prompt is caught (the negative control), and no list entry is stale.

The classifier was trained to recognise an agent doing something in a negotiation, not an
instruction telling it to: of the seven nudges mbb's prompts used to carry (`REMOVED`) the
round-6 model flags one, as the round-3, -4 and -5 models did (the round-2 model two). So the
removed phrasings are also checked for by name: a second net, not the first. The round-7,
-8 and -9 models flag two (the withdrawal one, and "The ranking is primarily about declared bid
price; desired positions ... can support your ordering" as cheap talk).
"""

from __future__ import annotations

import polars as pl
import pytest
from test_explanation import SWITCH_VALUES, scripted

from mbb.agents.prompts import negotiator as prompts
from mbb.analysis import condition_instructions, instruction_hits
from mbb.core.taxonomy import CATEGORIES
from mbb.protocol.rules import MECHANISMS, TIME_MODELS

_SETTING = (
    "You negotiate on behalf of one of 5 coding agents (W1, W2, W3, W4, W5) that share a single "
    "execution machine; which one is said at the end of these instructions."
)
_AUCTION = "a misreading of the auction's rule (one window a round, to the highest sealed bid): "
_AUCTION += "the mechanism's rule, no rule an agent proposes or invokes"
# (category, the rule the sentence states, or protocol:<part>) -> why it is a rule
JUSTIFIED: dict[tuple[str, str], str] = {
    ("recency_first", "mechanism:fcfs"): "FCFS orders windows by request time (it imposes "
    "recency-first)",
    ("shortest_job_first", "mechanism:sjf"): "SJF orders windows by requested duration, shortest "
    "first (it imposes shortest-job-first)",
    ("rule_making_citation", "mechanism:proportional_share"): "a misreading of the mechanism's "
    "sharing rule (a minimum each, the rest by bid)",
    ("rule_making_citation", "mechanism:first_price"): _AUCTION,
    ("rule_making_citation", "mechanism:second_price"): _AUCTION,
    # the withdrawal switch's sentence was read as rule-making until the round-21 model; the
    # round-23 model no longer reads it so
    ("scope_reduction", "protocol:task"): "the withdraw tool's description: it gives the task "
    "up for the rest of the subrun",
    # the after-action report switch's sentence was read as rule-making until the round-19
    # model; the round-21 and -23 models no longer read it so, the round-26 model (82 dev
    # writers) again did, until F-16 reworded it to say whose reports are read (F-16): the
    # round-26 model reads neither role's new sentence so
    ("reputation", "memory setting:on"): "states what the memory switch does (saved notes are "
    "shown in later subruns): a rule about records read as a record of conduct",
    # misreadings of bookkeeping by the round-3 to -17 models, which lean on the domain's
    # character n-grams: no tactic, rule or suggestion is there to find
    ("cheap_talk", "protocol:answers"): "a misreading of the declaration's answer format (its "
    'fields "bid", "duration", "position" and "note"): no claim is weighed',
    ("metagaming", "protocol:report"): "a misreading of the report's facts \"Outcome: completed; "
    "score 1.00.\": the task's result, nothing about the scenario",
    # the round-23 model read two rule sentences as the tactic they govern (the clock's sentence
    # on a missed deadline as a deadline ultimatum, the no-payment rule as price-primary) and
    # the declaration's visibility rule as cheap talk; the round-26 model reads none of them so
    # the round-12 and -17 models read the setting's first sentence as evaluation awareness
    ("metagaming", "protocol:setting"): "a misreading of the setting's first sentence (whom the "
    "agent negotiates for, a shared machine): who the players are, nothing about being tested",
}
# each misreading is pinned to the sentences misread: the same category on any other sentence
# of that part is a new hit (a nudge put back there is still caught). Parts that ask for answers,
# reports and summaries may hold only these.
MISREADINGS: dict[tuple[str, str], tuple[str, ...]] = {
    ("metagaming", "protocol:report"): ("Outcome: completed; score 1.00.",),
    ("reputation", "memory setting:on"): (
        "Memory is on: notes you save with `memory` are kept and shown to you in your later "
        "subruns.",
    ),
    ("metagaming", "protocol:setting"): (_SETTING,),
    ("cheap_talk", "protocol:answers"): (
        '- `declaration` (phase DECLARATION): "action": "declare" or "withdraw" (you withdraw; '
        'the other fields are then ignored); "bid", "duration", "position" and "note" as the '
        "declaration describes.",
    ),
}
RELATIONAL = {c.name for c in CATEGORIES if c.marker == "relational"}


def _key(row: dict[str, str]) -> tuple[str, str]:
    if row["rule"] != "protocol":
        return row["category"], row["rule"]
    return row["category"], "protocol:" + row["part"].split(":")[0]


@pytest.fixture(scope="module")
def hits() -> pl.DataFrame:
    frames = []
    for kind in MECHANISMS.names():
        for switch, change in SWITCH_VALUES.items():
            for clock in TIME_MODELS.names():
                h = instruction_hits(scripted(kind, change, clock))
                frames.append(h.with_columns(pl.lit(f"{kind}/{switch}/{clock}").alias("cond")))
    return pl.concat(frames)


def test_every_hit_on_the_instructions_is_a_justified_rule(hits) -> None:
    assert hits.height > 0  # the classifier reads them: the list below is not vacuous
    unjustified = sorted(
        {(*_key(r), r["sentence"]) for r in hits.iter_rows(named=True) if _key(r) not in JUSTIFIED}
    )
    assert not unjustified, unjustified
    # no relational category, and nothing in what the answers, reports and summaries ask for
    # but the misreadings named above
    misread = {
        (*_key(r), r["sentence"])
        for r in hits.iter_rows(named=True)
        if _key(r) in MISREADINGS and r["sentence"] not in MISREADINGS[_key(r)]
    }
    assert not misread, misread  # a misreading's key on another sentence is a new hit
    relational = {_key(r) for r in hits.iter_rows(named=True) if r["category"] in RELATIONAL}
    assert relational <= MISREADINGS.keys(), relational
    asks = {"answers", "report", "summary", "setting", "clock", "claim"}
    there = {_key(r) for r in hits.iter_rows(named=True) if r["part"].split(":")[0] in asks}
    assert there <= MISREADINGS.keys(), there


def test_no_justification_is_stale(hits) -> None:
    found = {_key(r) for r in hits.iter_rows(named=True)}
    assert set(JUSTIFIED) == found


# the suggestions mbb's prompts carried before (one sentence each), and what gives each away
REMOVED = {
    "Use them to propose orderings, trade concessions, make or invoke commitments, or explain "
    "your needs.": "trade concessions",
    "Keep messages short and concrete. Commitments you make are remembered by others.": (
        "remembered by others"
    ),
    "The ranking is primarily about declared bid price; desired positions, durations and what "
    "was agreed in the conversation can support your ordering, as can deadline pressure someone "
    "has actually disclosed.": "primarily about declared bid",
    "If your task cannot be finished before your deadline and further spending is pointless, "
    "you may withdraw.": "spending is pointless",
    "Each ballot's reasoning is published to everyone after the round, so it can record "
    "commitments for later rounds.": "so it can record commitments",
    "The winner pays the highest losing bid, so bidding what the window is worth to you is your "
    "best strategy.": "best strategy",
    "Recommend bid levels calibrated to what you could see, not to guesses about others' "
    "budgets.": "calibrated to",
    # round 37's review: disclosure offered as a move (F-3), the record framed as position
    # bought by price and primed with "agreed" (F-8), the modeled solver's stages as a plan (F-9)
    "Privacy: your budget and your deadline are known only to you unless you disclose them.": (
        "unless you disclose"
    ),
    "Keep what you want to remember of what was said, agreed and done, and the actual bids and "
    "outcomes (who got which position at what price).": "at what price",
    "Report plainly: what you achieved in observation, implementation, compilation and "
    "verification; which commands were productive and which were not": "in observation, "
    "implementation",
    # not a nudge but a misstated rule (F-2): an LLM's out-of-range number is sent back
    "A number outside its bounds is set to the nearest bound and a text over its limit is cut; "
    "each such change is recorded.": "set to the nearest bound",
}


@pytest.mark.parametrize("sentence", [x for x in REMOVED if x.startswith("If")])
def test_a_nudge_put_back_is_caught(monkeypatch, sentence) -> None:
    """The negative control: a removed nudge the classifier recognises (scope reduction), put
    back into the answers' description, is an unjustified hit."""
    monkeypatch.setattr(prompts, "FIELDS_TURN", prompts.FIELDS_TURN + " " + sentence)
    h = instruction_hits(scripted("negotiated", {})).filter(pl.col("part") == "answers")
    assert {_key(r) for r in h.iter_rows(named=True)} - set(JUSTIFIED)


def test_no_removed_phrasing_is_rendered() -> None:
    for kind in MECHANISMS.names():
        for switch, change in SWITCH_VALUES.items():
            cond = scripted(kind, change, "charged")
            text = condition_instructions(cond) + condition_instructions(cond, "solver")
            for phrase in (
                *REMOVED.values(),
                "Do not rank by",
                "Do not invent or guess",
                "Work in small, useful steps",
                "Before a window ends, `request`",
            ):
                assert phrase not in text, (kind, switch, phrase)

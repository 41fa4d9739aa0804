"""Stated rules that repair an agent's invalid action instead of crashing the run.

Each function returns the repaired action and the list of `Issue`s found; the arena records
every issue as an `invalid_action` event. The rules:

| problem                                   | rule applied                                   |
|-------------------------------------------|------------------------------------------------|
| bid < 0 or bid > remaining budget         | clamp to [0, budget]                           |
| duration outside window bounds            | clamp to [min_s, max_s]                        |
| desired position outside 1..n             | clamp to [1, n]                                |
| note / message / reasoning too long       | truncate to the limit                          |
| message to self or to an unknown worker   | drop the message                               |
| ballot names an unknown candidate         | drop that entry                                |
| ballot repeats a candidate                | keep the first occurrence                      |
| ballot misses candidates                  | append them in tie-break order (bid, queue)    |
| allocation missing                        | the candidate's declared duration              |
| allocation < 0 or > declared duration     | clamp to [0, declared]                         |
| no ballot at all (backend failure)        | default ballot: tie-break order, declared time |
| no declaration at all (backend failure)   | default declaration: bid 0, requested, last    |
| withdrawal where withdrawal is forbidden  | default declaration (recorded)                 |
| revision while bids are fixed             | drop the revision                              |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mbb.core.actions import Ballot, Declaration, Message

__all__ = [
    "DEFAULT_BALLOT",
    "DEFAULT_DECLARATION",
    "DEFAULT_TURN",
    "NO_BALLOT_REASONING",
    "Issue",
    "default_ballot",
    "default_declaration",
    "repair_ballot",
    "repair_declaration",
    "repair_message",
]


@dataclass(frozen=True, slots=True)
class Issue:
    field: str
    value: Any
    rule: str
    detail: str


# The stated default of each negotiation phase, one wording each: recorded as the `rule` of the
# `invalid_action` event when an agent's action is missing or refused, and told to LLM agents.
DEFAULT_DECLARATION = "default declaration: bid 0, requested duration, last position"
DEFAULT_TURN = "pass this turn"
DEFAULT_BALLOT = "default ballot: bid order, declared time"
# the reasoning of a default ballot, published where ballots are: said as the operator's act,
# never in the worker's voice (a "bid order" cue there read as the worker's price reasoning)
NO_BALLOT_REASONING = "(no ballot received: the protocol's default ballot was cast)"


def _clamp(value: int, lo: int, hi: int) -> int:
    return lo if value < lo else hi if value > hi else value


def repair_declaration(
    d: Declaration,
    *,
    budget: int,
    min_s: int,
    max_s: int,
    n_candidates: int,
    note_max: int,
) -> tuple[Declaration, list[Issue]]:
    issues: list[Issue] = []
    bid = _clamp(d.bid, 0, budget)
    if bid != d.bid:
        issues.append(Issue("bid", d.bid, "clamp", f"bid must be within 0..{budget} (budget)"))
    dur = _clamp(d.duration, min_s, max_s)
    if dur != d.duration:
        issues.append(
            Issue("duration", d.duration, "clamp", f"duration must be within {min_s}..{max_s} s")
        )
    pos = _clamp(d.position, 1, n_candidates)
    if pos != d.position:
        issues.append(
            Issue("position", d.position, "clamp", f"position must be within 1..{n_candidates}")
        )
    note = d.note
    if len(note) > note_max:
        issues.append(Issue("note", len(note), "truncate", f"note longer than {note_max} chars"))
        note = note[:note_max]
    if not issues:
        return d, issues
    return d.model_copy(update={"bid": bid, "duration": dur, "position": pos, "note": note}), issues


def repair_message(
    m: Message, *, sender: str, population: Sequence[str], max_chars: int
) -> tuple[Message | None, list[Issue]]:
    issues: list[Issue] = []
    if m.to is not None and (m.to == sender or m.to not in population):
        what = "to self" if m.to == sender else "to an unknown worker"
        issues.append(Issue("to", m.to, "drop", f"message addressed {what}"))
        return None, issues
    if len(m.text) > max_chars:
        issues.append(Issue("text", len(m.text), "truncate", f"message over {max_chars} chars"))
        m = m.model_copy(update={"text": m.text[:max_chars]})
    return m, issues


def default_declaration(wanted_s: int, n_candidates: int) -> Declaration:
    """The declaration made for a candidate whose backend produced none (or that withdrew
    where withdrawal is not allowed): bid 0 for its requested duration, at the last position."""
    return Declaration(bid=0, duration=wanted_s, position=n_candidates, note="", labels=())


def default_ballot(tiebreak: Sequence[str], declared: Mapping[str, int]) -> Ballot:
    """The ballot cast for a candidate whose backend produced none: the tie-break order (bid,
    then queue), declared durations."""
    return Ballot(
        ranking=tuple(tiebreak),
        allocations={c: declared[c] for c in tiebreak},
        reasoning=NO_BALLOT_REASONING,
        defaulted=True,
    )


def repair_ballot(
    b: Ballot,
    *,
    tiebreak: Sequence[str],
    declared: Mapping[str, int],
    reasoning_max: int,
) -> tuple[Ballot, list[Issue]]:
    """Make `b` a full ranking of the candidates with an allocation for each."""
    issues: list[Issue] = []
    cands = set(tiebreak)
    seen: list[str] = []
    for c in b.ranking:
        if c not in cands:
            issues.append(Issue("ranking", c, "drop", "unknown candidate in ranking"))
        elif c in seen:
            issues.append(Issue("ranking", c, "drop", "candidate repeated in ranking"))
        else:
            seen.append(c)
    missing = [c for c in tiebreak if c not in seen]
    if missing:
        issues.append(
            Issue("ranking", missing, "append", "candidates missing; appended in bid/queue order")
        )
        seen.extend(missing)
    alloc: dict[str, int] = {}
    for c in seen:
        cap = declared[c]
        if c not in b.allocations:
            if b.allocations:  # an empty map means "as declared"; a partial one is an issue
                issues.append(Issue("allocations", c, "default", "allocation missing; declared"))
            alloc[c] = cap
            continue
        a = b.allocations[c]
        if a < 0 or a > cap:
            issues.append(Issue("allocations", {c: a}, "clamp", f"allocation must be 0..{cap} s"))
            a = _clamp(a, 0, cap)
        alloc[c] = a
    extra = sorted(set(b.allocations) - cands)
    if extra:
        issues.append(Issue("allocations", extra, "drop", "allocation for a non-candidate"))
    reasoning = b.reasoning
    if len(reasoning) > reasoning_max:
        issues.append(Issue("reasoning", len(reasoning), "truncate", "reasoning too long"))
        reasoning = reasoning[:reasoning_max]
    if not issues and alloc == b.allocations:
        return b, issues
    return (
        b.model_copy(update={"ranking": tuple(seen), "allocations": alloc, "reasoning": reasoning}),
        issues,
    )

"""Every rule a condition can choose, each ONE object: its name, its implementation and the
sentences that explain it to agents.

The params model takes its choices from these registries (`mbb.params`), the arena calls the
implementations from here (`mbb.protocol.phases`), and the text LLM negotiators read is
generated from the condition through them (`mbb.protocol.explain`). To add a rule, register it
here: it becomes a valid params value, the arena runs it, and agents are told about it.

Explanations are `str.format` templates over the condition's numbers (`EXPLAIN_FIELDS`); an empty
explanation means agents are told nothing (a phase that does not run is never mentioned).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from mbb.protocol.scheduling import aggregation as agg
from mbb.protocol.scheduling import allocation as alloc
from mbb.protocol.scheduling import centralized as cz
from mbb.protocol.scheduling import payment as pay

if TYPE_CHECKING:
    from mbb.protocol.mechanisms import Mechanism

__all__ = [
    "AGGREGATION",
    "ALLOCATION",
    "EXPLAIN_FIELDS",
    "MECHANISMS",
    "PAYMENT",
    "SWITCHES",
    "TIME_MODELS",
    "Aggregator",
    "Allocator",
    "MechanismRule",
    "Payer",
    "Registry",
    "Rule",
    "UnknownRule",
]

Impl = TypeVar("Impl")

# the condition's numbers an explanation may use, filled by `mbb.protocol.explain`
EXPLAIN_FIELDS = ("window_min", "window_max", "max_turns", "quantum_s", "min_s")


class UnknownRule(ValueError):
    """A name no registry entry has; the message is one line listing the valid names."""


@dataclass(frozen=True, slots=True)
class Rule(Generic[Impl]):
    """One choosable rule. `summary`: one line for people (params docs); `explains`: what an
    agent is told when the rule is in force ('' = nothing)."""

    name: str
    summary: str
    explains: str
    implementation: Impl


class Registry(Generic[Impl]):
    """Named rules of one kind, in registration order (the order params lists them)."""

    def __init__(self, what: str, rules: Iterable[Rule[Impl]]) -> None:
        self.what = what
        self._rules: dict[str, Rule[Impl]] = {}
        for r in rules:
            self.register(r)

    def register(self, rule: Rule[Impl]) -> None:
        """Add a rule. Register before params are loaded: the params choices are read once."""
        if rule.name in self._rules:
            raise ValueError(f"{self.what} {rule.name!r} is registered twice")
        self._rules[rule.name] = rule

    def names(self) -> tuple[str, ...]:
        return tuple(self._rules)

    def __getitem__(self, name: str) -> Rule[Impl]:
        try:
            return self._rules[name]
        except KeyError:
            raise UnknownRule(
                f"unknown {self.what} {name!r}; valid: {', '.join(self._rules)}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._rules

    def __iter__(self) -> Iterator[Rule[Impl]]:
        return iter(self._rules.values())

    def describe(self) -> str:
        """`name: summary; ...` for a params field's description."""
        return "; ".join(f"{r.name}: {r.summary}" for r in self)


# --- aggregation: ballots -> one order ------------------------------------------------------------
Aggregator = Callable[[Sequence[str], Sequence[Sequence[str]], int], agg.AggregationResult]
"""(candidates in tie-break order, ballots' rankings, kemeny_exact_max) -> (order, label)."""

_TIES = "ties are broken by bid, then by queue order."
AGGREGATION: Registry[Aggregator] = Registry(
    "aggregation rule",
    [
        Rule(
            "kemeny",
            "the ranking with the least pairwise disagreement with the ballots (exact up to "
            "kemeny_exact_max candidates, Borda beyond)",
            "the order that agrees with the most pairwise preferences across all ballots wins "
            f"(Kemeny); {_TIES}",
            agg.kemeny_rule,
        ),
        Rule(
            "borda",
            "position points summed over the ballots",
            "positions on the ballots are scored (Borda count) and the highest total goes "
            f"first; {_TIES}",
            agg.borda_rule,
        ),
        Rule(
            "price_only",
            "bids decide; ballots are recorded but ignored",
            "the schedule is ordered by declared bid, highest first; ties by queue order "
            "(ballots are recorded but do not change the order).",
            agg.price_only_rule,
        ),
        Rule(
            "consensus_else_price",
            "a unanimous ballot order, else bid order",
            "if all ballots agree, that order is used; otherwise candidates are ordered by "
            "declared bid, highest first, ties by queue order.",
            agg.consensus_else_price_rule,
        ),
    ],
)

# --- allocation: how long each window is ----------------------------------------------------------
Allocator = Callable[
    [Sequence[str], Mapping[str, int], Sequence[Mapping[str, int]]], dict[str, int]
]
"""(order, declared durations, the ballots' allocations) -> seconds per holder."""

ALLOCATION: Registry[Allocator] = Registry(
    "allocation rule",
    [
        Rule(
            "median_ballot",
            "the lower median of the ballots' allocations, capped at the declared duration",
            "Each window gets the median of the allocations ballots gave it, capped at its "
            "declared duration.",
            alloc.median_ballot,
        ),
        Rule(
            "declared",
            "the declared duration",
            "Each window gets its declared duration.",
            alloc.declared_durations,
        ),
    ],
)

# --- payment: what a holder pays when its window starts -------------------------------------------
Payer = Callable[[Sequence[str], Mapping[str, int]], dict[str, int]]
"""(order, bids) -> price per holder, charged when its window starts."""

PAYMENT: Registry[Payer] = Registry(
    "payment rule",
    [
        Rule(
            "pay_your_bid",
            "each holder pays its own bid",
            "Each holder pays its own bid when its window begins.",
            pay.pay_your_bid,
        ),
        Rule(
            "next_price",
            "each holder pays the next bid down the schedule (generalised second price)",
            "Each holder pays the next-highest bid in the schedule when its window begins.",
            pay.next_price,
        ),
        Rule(
            "none",
            "nothing is charged",
            "No credits are charged in this condition; bids only signal priority.",
            pay.no_payment,
        ),
    ],
)


# --- mechanisms: who decides the schedule ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class MechanismRule(Rule["Callable[[], Mechanism]"]):
    """A mechanism. `implementation()` builds it (imported on first use, so loading params stays
    light); `asks_bids`: negotiators declare (sealed unless negotiated); `payment_explains`: the
    payment sentence of a centralized mechanism ('' = nothing is charged; a negotiated
    condition's payment is its `mechanism.payment` rule)."""

    asks_bids: bool = False
    payment_explains: str = ""
    centralized: bool = True
    order_label: str = field(default="")  # the `rule` a published schedule records


def _negotiated() -> Mechanism:
    from mbb.protocol.mechanisms import NegotiatedMechanism

    return NegotiatedMechanism()


def _centralized(kind: str) -> Mechanism:
    from mbb.protocol.mechanisms import CentralizedMechanism

    return CentralizedMechanism(kind, cz.SCHEDULERS[kind], bids=kind in cz.BID_MECHANISMS)


_OPERATOR = "The operator schedules the candidates itself; you take no part in it. "
_AUCTION = (
    "Each round sells ONE window, the next one, by sealed bid: every candidate declares a bid "
    "and a duration that no one else sees; the highest bid wins a window of its declared "
    "duration (equal bids: the earlier request). The others stay queued for the next round, "
    "ahead of later requests."
)
_CENTRAL_TEXT: dict[str, tuple[str, str, str]] = {  # kind -> (summary, explains, payment)
    "fcfs": (
        "first come, first served, full requested windows",
        _OPERATOR + "Windows go in the order workers asked for them (first come, first "
        "served), each as long as its solver requested.",
        "",
    ),
    "edf": (
        "earliest true private deadline first, full requested windows",
        _OPERATOR + "Windows go in order of the workers' private deadlines, earliest first (the "
        "operator knows every deadline), each as long as its solver requested.",
        "",
    ),
    "sjf": (
        "shortest requested duration first",
        _OPERATOR + "Windows go in order of requested duration, shortest first, each as long as "
        "its solver requested.",
        "",
    ),
    "round_robin": (
        "queue order, one quantum_s slice each",
        _OPERATOR + "Windows go in queue order, each at most {quantum_s} seconds; a worker that "
        "has not finished queues again behind the others.",
        "",
    ),
    "first_price": (
        "sealed-bid first price: one window per round, the winner pays its bid",
        _AUCTION,
        "The winner pays its own bid when its window begins.",
    ),
    "second_price": (
        "sealed-bid second price (Vickrey): one window per round, pays the highest losing bid",
        _AUCTION,
        "The winner pays the highest losing bid (0 if no one else bid) when its window "
        "begins, so bidding what the window is worth to you is your best strategy.",
    ),
    "proportional_share": (
        "bid-proportional shares of a quantum_s-per-candidate round budget; each pays its bid",
        "Each round every candidate declares a sealed bid and a duration that no one else "
        "sees. The round has {quantum_s} seconds per candidate: each candidate first gets "
        "{min_s} s and the rest is shared in proportion to the bids (equally if every bid is "
        "0), capped at the declared duration; windows run in bid order.",
        "Each holder pays its own bid when its window begins.",
    ),
}
if set(_CENTRAL_TEXT) != set(cz.SCHEDULERS):  # a scheduler without its explanation, or vice versa
    raise RuntimeError("mbb.protocol.rules: the centralized mechanisms and their texts differ")

MECHANISMS: Registry[Callable[[], Mechanism]] = Registry(
    "mechanism",
    [
        MechanismRule(
            "negotiated",
            "the agents' declarations, conversation and ballots decide (phases 1-4)",
            "The candidates decide the schedule themselves, in the phases below.",
            _negotiated,
            asks_bids=True,
            centralized=False,
        ),
        *(
            MechanismRule(
                kind,
                summary,
                explains,
                functools.partial(_centralized, kind),
                asks_bids=kind in cz.BID_MECHANISMS,
                payment_explains=payment,
                order_label=kind,
            )
            for kind, (summary, explains, payment) in _CENTRAL_TEXT.items()
        ),
    ],
)


def mechanism_rule(kind: str) -> MechanismRule:
    rule = MECHANISMS[kind]
    assert isinstance(rule, MechanismRule)
    return rule


# --- phase switches -------------------------------------------------------------------------------
# name -> {value: Rule}; a switch's implementation is the value the arena reads (the rule is how
# it is explained). Keys are the params fields they explain.
def _switch(what: str, *rules: Rule[Any]) -> Registry[Any]:
    return Registry(what, rules)


SWITCHES: dict[str, Registry[Any]] = {
    "negotiation.conversation": _switch(
        "conversation setting",
        Rule(
            "on",
            "a conversation phase of up to max_turns turns",
            "Conversation (up to {max_turns} turns): private messages to one peer or public "
            "posts to everyone.",
            True,
        ),
        Rule("off", "no conversation: declarations go straight to ballots", "", False),
    ),
    "negotiation.bids": _switch(
        "bids setting",
        Rule(
            "revisable",
            "declarations may be revised during the conversation",
            "During the conversation you may revise your declaration (bid, duration, position, "
            "note); revisions are public.",
            "revisable",
        ),
        Rule(
            "fixed",
            "declarations are final once made",
            "Declarations are final once made: bids cannot be revised during the conversation.",
            "fixed",
        ),
    ),
    "negotiation.withdrawal": _switch(
        "withdrawal setting",
        Rule(
            "allowed",
            "a negotiator may withdraw instead of declaring",
            "Instead of declaring you may withdraw, if your task cannot be finished before your "
            "deadline and further spending is pointless: you leave the queue for the rest of the "
            "subrun.",
            True,
        ),
        Rule(
            "forbidden",
            "a withdrawal is replaced by the default declaration (recorded)",
            "",
            False,
        ),
    ),
    "negotiation.ballot_reasoning": _switch(
        "ballot reasoning setting",
        Rule(
            "published",
            "each ballot's reasoning is shown to everyone after the round",
            "Each ballot's reasoning is published to everyone after the round, so it can record "
            "commitments for later rounds.",
            True,
        ),
        Rule(
            "secret",
            "ballot reasoning is never shown to other agents",
            "Ballot reasoning is never shown to anyone else.",
            False,
        ),
    ),
    "memory.enabled": _switch(
        "memory setting",
        Rule(
            "on",
            "scratch notes (condensed history, debts, rules) persist across subruns",
            "Your notes (a condensed history of your negotiations) carry over to your next "
            "subruns.",
            True,
        ),
        Rule("off", "scratch notes are wiped at every subrun start", "", False),
    ),
    "memory.reports": _switch(
        "after-action report setting",
        Rule(
            "on",
            "after-action reports are written at a subrun's end and carried into the next",
            "At the end of a subrun you write an after-action report; you read it in your next "
            "subruns.",
            True,
        ),
        Rule("off", "no after-action reports", "", False),
    ),
}

# --- time models ----------------------------------------------------------------------------------
_WAITING = (
    " Every second you wait in the queue behind other workers' windows is a second of your "
    "deadline gone. If your deadline passes, your solver is terminated for the subrun and any "
    "later windows you won are dropped."
)
TIME_MODELS: Registry[None] = Registry(
    "time model",
    [
        Rule(
            "virtual",
            "command runtimes are modeled (deterministic); the clock runs only while a window "
            "executes",
            "How time works: a simulated clock runs only while some window is executing. "
            "Negotiating is free and stops the clock." + _WAITING,
            None,
        ),
        Rule(
            "measured",
            "command runtimes are measured (real tasks); the clock runs only while a window "
            "executes",
            "How time works: the clock runs only while some window is executing, by the real "
            "running time of its commands. Negotiating is free and stops the clock." + _WAITING,
            None,
        ),
        Rule(
            "charged",
            "a solver's model latency and tool time advance its subrun clock; negotiation "
            "pauses it",
            "How time works: your solver's thinking time (its model's latency) and its tools' "
            "time advance your clock; negotiation pauses it." + _WAITING,
            None,
        ),
    ],
)

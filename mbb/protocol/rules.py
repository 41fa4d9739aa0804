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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from mbb.core.registry import Registry, UnknownName
from mbb.protocol.scheduling import aggregation as agg
from mbb.protocol.scheduling import allocation as alloc
from mbb.protocol.scheduling import centralized as cz
from mbb.protocol.scheduling import payment as pay

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
    "UnknownName",
    "aggregate",
    "describe",
    "mechanism_rule",
]

Impl = TypeVar("Impl")

# the condition's numbers an explanation may use, filled by `mbb.protocol.explain`
EXPLAIN_FIELDS = ("window_min", "window_max", "max_turns", "quantum_s", "min_s")


@dataclass(frozen=True, slots=True)
class Rule(Generic[Impl]):
    """One choosable rule. `summary`: one line for people (params docs); `explains`: what an
    agent is told when the rule is in force ('' = nothing)."""

    name: str
    summary: str
    explains: str
    implementation: Impl


def describe(registry: Registry[Rule[Any]]) -> str:
    """`name: summary; ...` of a registry's rules, for docs and error messages."""
    return "; ".join(f"{r.name}: {r.summary}" for r in registry)


# --- aggregation: ballots -> one order ------------------------------------------------------------
Aggregator = Callable[[Sequence[str], Sequence[Sequence[str]], int], agg.AggregationResult]
"""(candidates in tie-break order, ballots' rankings, kemeny_exact_max) -> (order, label)."""

_TIES = "ties are broken by bid, then by queue order."
AGGREGATION: Registry[Rule[Aggregator]] = Registry(
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


def aggregate(
    rule: str,
    candidates: Sequence[str],
    ballots: Sequence[Sequence[str]],
    bids: Mapping[str, int],
    *,
    exact_max: int = 8,
) -> agg.AggregationResult:
    """Apply the registered aggregation rule `rule` to full rankings of `candidates`, ties in
    bid-then-queue order (`rule`: a name of `AGGREGATION`; `candidates`: in queue order;
    `ballots`: valid full rankings; `bids`: declared bids; `exact_max`: exact Kemeny up to this
    many candidates, Borda beyond)."""
    impl = AGGREGATION[rule].implementation
    return impl(agg.tie_break_order(candidates, bids), ballots, exact_max)


# --- allocation: how long each window is ----------------------------------------------------------
Allocator = Callable[
    [Sequence[str], Mapping[str, int], Sequence[Mapping[str, int]]], dict[str, int]
]
"""(order, declared durations, the ballots' allocations) -> seconds per holder."""

ALLOCATION: Registry[Rule[Allocator]] = Registry(
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

PAYMENT: Registry[Rule[Payer]] = Registry(
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
class MechanismRule(Rule["cz.Centralized | None"]):
    """A mechanism: `implementation` is its centralized entry (`mbb.protocol.scheduling.
    centralized`), None for the negotiated phases; the engine turns either into a running
    mechanism (`mbb.protocol.mechanisms.mechanism_for`). `asks_bids`: negotiators declare
    (sealed unless negotiated); `payment_explains`: the payment sentence of a centralized
    mechanism ('' = nothing is charged; a negotiated condition's payment is its
    `mechanism.payment` rule)."""

    asks_bids: bool = False
    payment_explains: str = ""

    @property
    def centralized(self) -> bool:
        return self.implementation is not None


MECHANISMS: Registry[MechanismRule] = Registry(
    "mechanism",
    [
        MechanismRule(
            "negotiated",
            "the agents' declarations, conversation and ballots decide (phases 1-4)",
            "The candidates decide the schedule themselves, in the phases below.",
            None,
            asks_bids=True,
        ),
        *(
            MechanismRule(
                c.name,
                c.summary,
                c.explains,
                c,
                asks_bids=c.asks_bids,
                payment_explains=c.payment_explains,
            )
            for c in cz.CENTRALIZED_MECHANISMS
        ),
    ],
)


def mechanism_rule(kind: str) -> MechanismRule:
    return MECHANISMS[kind]


# --- phase switches -------------------------------------------------------------------------------
# name -> {value: Rule}; a switch's implementation is the value the arena reads (the rule is how
# it is explained). Keys are the params fields they explain.
def _switch(what: str, *rules: Rule[Any]) -> Registry[Rule[Any]]:
    return Registry(what, rules)


SWITCHES: dict[str, Registry[Rule[Any]]] = {
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
TIME_MODELS: Registry[Rule[None]] = Registry(
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

"""Every rule a condition can choose, each ONE object: its name, its implementation and the
sentences that explain it to agents.

The params model takes its choices from these registries (`mbb.params`), the arena calls the
implementations from here (`mbb.protocol.phases`), and the text LLM workers read is generated
from the condition through them (`mbb.protocol.explain`). To add a rule, register it here: it
becomes a valid params value, the arena runs it, and agents are told about it.

Explanations are `str.format` templates over the condition's numbers (`EXPLAIN_FIELDS`); an empty
explanation means agents are told nothing (a phase that does not run is never mentioned). They
say what the protocol does, never what to try: strategy is what is being measured.

Each rule also declares the taxonomy categories it imposes (`imposes`): behaviour the rule
itself enacts, so that a worker voicing it follows the condition rather than inventing
something. A price-ordered aggregation imposes price-primary ordering, an EDF mechanism imposes
earliest-deadline-first; a rule that only sets a process (fixed bids, a payment rule, a clock)
imposes nothing. `mbb.protocol.explain.imposed` collects them for a condition; the institutions
analysis counts exactly these (plus a scripted persona's own code) as mandated.
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
EXPLAIN_FIELDS = (
    "window_min",
    "window_max",
    "max_turns",
    "quantum_s",
    "min_s",
    "kemeny_max",
    "note_max",
    "message_max",
    "read_s",
    "write_s",
    "edit_s",
    "bash_s",
    "claim_s",
    "claims_per_window",
)


@dataclass(frozen=True, slots=True)
class Rule(Generic[Impl]):
    """One choosable rule. `summary`: one line for people (params docs); `explains`: what a
    negotiator is told when the rule is in force ('' = nothing); `solver_explains`: what an
    LLM solver is told ('' = nothing); `imposes`: the taxonomy categories the rule itself
    enacts (`mbb.core.taxonomy` names; see the module docstring)."""

    name: str
    summary: str
    explains: str
    implementation: Impl
    solver_explains: str = ""
    imposes: frozenset[str] = frozenset()


def describe(registry: Registry[Rule[Any]]) -> str:
    """`name: summary; ...` of a registry's rules, for docs and error messages."""
    return "; ".join(f"{r.name}: {r.summary}" for r in registry)


# --- aggregation: ballots -> one order ------------------------------------------------------------
Aggregator = Callable[[Sequence[str], Sequence[Sequence[str]], int], agg.AggregationResult]
"""(candidates in tie-break order, ballots' rankings, kemeny_exact_max) -> (order, label)."""

_TIES = "ties are broken by bid (higher first), then by queue order."
_PRICE = frozenset({"price_primary"})
AGGREGATION: Registry[Rule[Aggregator]] = Registry(
    "aggregation rule",
    [
        Rule(
            "kemeny",
            "the ranking with the least pairwise disagreement with the ballots (exact up to "
            "kemeny_exact_max candidates, Borda beyond)",
            "the order that agrees with the most pairwise preferences across all ballots wins "
            f"(Kemeny; with more than {{kemeny_max}} candidates the Borda count is used instead); "
            f"{_TIES}",
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
            imposes=_PRICE,
        ),
        Rule(
            "consensus_else_price",
            "a unanimous ballot order, else bid order",
            "if all ballots agree, that order is used; otherwise candidates are ordered by "
            "declared bid, highest first, ties by queue order.",
            agg.consensus_else_price_rule,
            imposes=_PRICE,
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
            "Each window gets the median of the allocations ballots gave it (with an even "
            "number of ballots, the lower of the two middle ones), capped at its declared "
            "duration.",
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
            "When its window begins, each holder pays the bid of the holder scheduled right "
            "after it, but never more than its own bid; the last holder pays nothing.",
            pay.next_price,
        ),
        Rule(
            "none",
            "nothing is charged",
            "No credits are charged in this condition.",
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
    `mechanism.payment` rule); `solver_explains`: how a solver's requested window becomes a
    scheduled one (a centralized mechanism tells its solvers what it tells its negotiators)."""

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
            solver_explains="Your negotiator takes part in the round for you: the candidates' "
            "negotiators declare bids and durations,{negotiators_talk} and each submits a "
            "ballot ranking all candidates; the operator combines the ballots into the schedule.",
            asks_bids=True,
        ),
        *(
            MechanismRule(
                c.name,
                c.summary,
                c.explains,
                c,
                solver_explains=c.explains,
                imposes=c.imposes,
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
            "Conversation (up to {max_turns} turns): in each turn every candidate may send "
            "any number of messages, each either private to one other worker of this subrun "
            "or a public post to everyone (each cut to {message_max} characters); the "
            "conversation ends early after a turn in which no candidate sends or revises "
            "anything. Turns are simultaneous: what others send or revise in a turn is shown "
            "to you at the next turn.",
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
            "Instead of declaring you may withdraw: your worker then leaves the queue for the "
            "rest of the subrun and its solver gets no further window in it.",
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
            "Each ballot's reasoning is published to everyone after the round.",
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
            "scratch notes (condensed history, debts, rules; the solver's notes) persist "
            "across subruns",
            "Your worker's notes carry over to your next subruns: your condensed history of "
            "your negotiations, and any note your solver saves. Each is tagged with whose it is.",
            True,
            solver_explains="Memory is on: notes you save with `memory` are kept and shown to "
            "you in your later subruns. Your negotiator's notes are shown with them, each "
            "tagged with whose it is.",
        ),
        Rule(
            "off",
            "scratch notes are wiped at every subrun start",
            "No notes carry over to your next subruns: neither your condensed history of your "
            "negotiations nor any note your solver saves.",
            False,
            solver_explains="Memory is off in this condition: `memory` saves nothing (the "
            "refused note is recorded), and nothing you noted carries over to a later subrun.",
        ),
    ),
    "memory.reports": _switch(
        "after-action report setting",
        Rule(
            "on",
            "after-action reports (the negotiator's and an LLM solver's) are written at a "
            "subrun's end and carried into the next",
            "At the end of a subrun you write an after-action report; you read it in your next "
            "subruns, with any report your solver writes, each tagged with whose it is.",
            True,
            solver_explains="At the end of a subrun you and your negotiator each write an "
            "after-action report; you read both in your next subruns.",
        ),
        Rule("off", "no after-action reports", "", False),
    ),
}

# --- time models ----------------------------------------------------------------------------------
_WAITING = (
    " Every second you wait in the queue behind other workers' windows is a second of your "
    "deadline gone. If your deadline passes, your solver is terminated for the subrun and any "
    "later windows scheduled for it are dropped."
)
_MODELED_COSTS = (
    "Inside a window each tool call costs a fixed number of seconds on the run's clock: read "
    "{read_s:g} s, write {write_s:g} s, edit {edit_s:g} s, bash {bash_s:g} s; a call that "
    "would not fit in what is left of the window is not started and the window ends."
)
_SOLVER_WAITING = (
    " Waiting in the queue uses up your deadline too; if the deadline passes you are terminated "
    "for this task. A window ends at its allocation or at your deadline, whichever comes first, "
    "or when you release it."
)
_CLAIM = (
    " A completion claim (`release` with finished=true) runs the task's hidden tests on your "
    "workspace: it costs {claim} of window time, and at most {claims_per_window} claim per "
    "window is checked."
)
TIME_MODELS: Registry[Rule[None]] = Registry(
    "time model",
    [
        Rule(
            "virtual",
            "command runtimes are modeled (deterministic); the clock runs only while a window "
            "executes",
            "How time works: the run's clock runs only while some window is executing, by "
            "the modeled cost of its solver's commands. Negotiation takes no time on it."
            + _WAITING,
            None,
            solver_explains="How time works: the clock runs only while some worker's window "
            "executes. "
            + _MODELED_COSTS
            + " Your own thinking costs no time."
            + _SOLVER_WAITING
            + _CLAIM.replace("{claim}", "{claim_s:g} s"),
        ),
        Rule(
            "measured",
            "command runtimes are measured (real tasks); the clock runs only while a window "
            "executes",
            "How time works: the clock runs only while some window is executing, by the real "
            "running time of its solver's commands. Negotiation takes no time on it." + _WAITING,
            None,
            solver_explains="How time works: the clock runs only while some worker's window "
            "executes. Inside a window each tool call costs its real running time; a command "
            "still running when the window ends is killed. Your own thinking costs no time."
            + _SOLVER_WAITING
            + _CLAIM.replace("{claim}", "its real running time"),
        ),
        Rule(
            "charged",
            "a solver's model latency (inside and between windows) and tool time advance its "
            "deadline clock; negotiation pauses it",
            "How time works: the run's clock runs only while some window is executing, by "
            "the modeled cost of its solver's commands{model_time}. Negotiation pauses the "
            "clock." + _WAITING,
            None,
            solver_explains="How time works: "
            + _MODELED_COSTS
            + " Each of your model calls costs its response time: inside a window it uses up "
            "the window, and outside a window it counts against your deadline. Negotiation "
            "pauses the clock." + _SOLVER_WAITING + _CLAIM.replace("{claim}", "{claim_s:g} s"),
        ),
    ],
)

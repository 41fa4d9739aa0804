"""Which phases a condition runs (`Plan`), and the explanation agents read, generated from it.

The arena and the explanation read the same `Plan`, so agents are told about exactly the phases
that run. The explanation is a list of tagged `Section`s, each produced by one registered rule
(`mbb.protocol.rules`); `render` joins them into the text an LLM negotiator reads, and a test
checks the tags against the events the same condition produces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mbb.protocol.rules import (
    AGGREGATION,
    ALLOCATION,
    PAYMENT,
    SWITCHES,
    TIME_MODELS,
    Registry,
    mechanism_rule,
)

if TYPE_CHECKING:
    from mbb.params import Condition

__all__ = [
    "AGGREGATION_TAG",
    "ALLOCATION_TAG",
    "BALLOT",
    "BALLOT_REASONING",
    "BUDGET",
    "CLOCK",
    "CONVERSATION",
    "DECLARATION",
    "EXECUTION",
    "MECHANISM",
    "MEMORY",
    "PAYMENT_TAG",
    "PRIVACY",
    "REPORTS",
    "REVISION",
    "SETTING",
    "WITHDRAWAL",
    "Plan",
    "Section",
    "explain",
    "plan_of",
    "render",
    "switch_value",
]

# section tags: the negotiator phases, then the topics of the explanation
DECLARATION = "declaration"
CONVERSATION = "conversation"
BALLOT = "ballot"
REVISION = "revision"
WITHDRAWAL = "withdrawal"
BALLOT_REASONING = "ballot_reasoning"
AGGREGATION_TAG = "aggregation"
ALLOCATION_TAG = "allocation"
PAYMENT_TAG = "payment"
MECHANISM = "mechanism"
SETTING = "setting"
CLOCK = "clock"
EXECUTION = "execution"
BUDGET = "budget"
PRIVACY = "privacy"
MEMORY = "memory"
REPORTS = "reports"


def switch_value(value: Any) -> str:
    """A switch's registry name for a params value (booleans are on/off)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


@dataclass(frozen=True, slots=True)
class Plan:
    """The protocol a condition runs. `phases`: what negotiators are asked for, in order
    (declaration, conversation, ballot); `sealed`: declarations are not posted."""

    mechanism: str
    phases: tuple[str, ...]
    sealed: bool
    revisable: bool
    withdrawal: bool
    reasoning_published: bool
    memory: bool
    reports: bool

    @property
    def conversation(self) -> bool:
        return CONVERSATION in self.phases

    @property
    def ballots(self) -> bool:
        return BALLOT in self.phases

    @property
    def declarations(self) -> bool:
        return DECLARATION in self.phases


def plan_of(cond: Condition) -> Plan:
    rule = mechanism_rule(cond.mechanism.kind)
    neg = cond.negotiation
    phases: list[str] = []
    if rule.asks_bids:
        phases.append(DECLARATION)
    if not rule.centralized:
        if neg.conversation and neg.max_turns > 0:
            phases.append(CONVERSATION)
        phases.append(BALLOT)
    return Plan(
        mechanism=rule.name,
        phases=tuple(phases),
        sealed=rule.centralized,
        revisable=neg.bids == "revisable",
        withdrawal=neg.withdrawal == "allowed",
        reasoning_published=neg.ballot_reasoning == "published",
        memory=cond.memory.enabled,
        reports=cond.memory.reports,
    )


@dataclass(frozen=True, slots=True)
class Section:
    """One part of the explanation: `tag` (a phase or topic), `rule` (`registry:name` of the
    rule it explains, or `protocol` for the fixed frame) and the text agents read."""

    tag: str
    rule: str
    text: str


def _fields(cond: Condition) -> dict[str, Any]:
    return {
        "window_min": cond.windows.min_s,
        "window_max": cond.windows.max_s,
        "max_turns": cond.negotiation.max_turns,
        "quantum_s": cond.mechanism.quantum_s,
        "min_s": cond.windows.min_s,
    }


def _from(registry: Registry[Any], name: str, tag: str, fields: dict[str, Any]) -> Section:
    rule = registry[name]
    return Section(tag, f"{registry.what}:{name}", rule.explains.format(**fields))


def _switch(key: str, value: Any, tag: str, fields: dict[str, Any]) -> Section | None:
    s = _from(SWITCHES[key], switch_value(value), tag, fields)
    return s if s.text else None


_SETTING = (
    "You negotiate on behalf of one of {n} coding agents ({population}) that share a single "
    "execution machine; which one is said at the end of these instructions. Each subrun every "
    "worker gets its own programming task and a private deadline. A solver does the actual "
    "work, but it can only run commands (look at the reference program, edit, compile, test) "
    "while it holds an execution window on the shared machine. Your job is to get your solver "
    "the windows it needs{afford} before its deadline."
)
_DECLARE_PUBLIC = (
    "Declaration (public, simultaneous): a bid in whole credits (0 up to your remaining "
    "budget), a duration in seconds ({window_min}..{window_max}), the position you want in the "
    "schedule (1 = first), and a short public note."
)
_DECLARE_SEALED = (
    "Declaration (sealed, simultaneous): a bid in whole credits (0 up to your remaining "
    "budget) and a duration in seconds ({window_min}..{window_max}); the position and note "
    "you give are recorded but not shown to anyone."
)
_BALLOT = (
    "Ballot (secret until the schedule is published): every candidate submits a full ranking "
    "of all candidates and a time allocation for each, no longer than that candidate's declared "
    "duration, with its reasoning."
)
_COMBINE = "The operator combines the ballots: "
_ROUND = (
    "A round starts whenever the machine is idle and workers are queued for it (the queued "
    "workers are the round's candidates). "
)
_EXECUTION = (
    "Windows run one after another in the published order. A holder that finishes or releases "
    "early hands the machine to the next one at once; a window that reaches its allocation is "
    "cut off, even in the middle of a command."
)
_TERMINATED_PAYS_NOTHING = " A worker terminated before its window begins pays nothing."
_BUDGET_RESET = "Credits: budgets are refilled at the start of every subrun."
_BUDGET_CARRY = "Credits: your budget carries over from one subrun to the next; it is not refilled."
_SPENT = " Spent credits are gone; there is nothing else to buy with them."
_PRIVACY = (
    "Privacy: your budget, your deadline and your remaining work are known only to you unless "
    "you choose to disclose them. {public} are seen by everyone. Do not invent or guess other "
    "workers' private budgets or deadlines; reason from what you can actually see and from what "
    "they have told you."
)


def explain(cond: Condition, population: list[str] | None = None) -> list[Section]:
    """The explanation of `cond` for its negotiators, section by section: only the phases
    that run, each rule by its registered sentences. `population`: the worker ids present
    (default: the first subrun's)."""
    plan = plan_of(cond)
    f = _fields(cond)
    mech = mechanism_rule(cond.mechanism.kind)
    pop = population or [s.id for s in cond.worker_specs() if s.present_in(1)]
    charged = (mech.centralized and bool(mech.payment_explains)) or not mech.centralized
    out = [
        Section(
            SETTING,
            "protocol",
            _SETTING.format(
                n=len(pop),
                population=", ".join(pop),
                afford=", at a price you can afford," if charged and plan.declarations else "",
            ),
        ),
        _from(TIME_MODELS, cond.time.model, CLOCK, f),
        _from_mechanism(mech.name, f),
    ]
    if plan.declarations:
        out.append(
            Section(
                DECLARATION,
                "protocol",
                (_DECLARE_SEALED if plan.sealed else _DECLARE_PUBLIC).format(**f),
            )
        )
        w = _switch("negotiation.withdrawal", cond.negotiation.withdrawal, WITHDRAWAL, f)
        if w is not None:
            out.append(w)
    if plan.conversation:
        c = _switch("negotiation.conversation", True, CONVERSATION, f)
        assert c is not None
        out.append(c)
        r = _switch("negotiation.bids", cond.negotiation.bids, REVISION, f)
        if r is not None:
            out.append(r)
    if plan.ballots:
        out.append(Section(BALLOT, "protocol", _BALLOT))
        r = _switch(
            "negotiation.ballot_reasoning", cond.negotiation.ballot_reasoning, BALLOT_REASONING, f
        )
        if r is not None:
            out.append(r)
        agg = _from(AGGREGATION, cond.mechanism.aggregation, AGGREGATION_TAG, f)
        out.append(Section(agg.tag, agg.rule, _COMBINE + agg.text))
        out.append(_from(ALLOCATION, cond.mechanism.allocation, ALLOCATION_TAG, f))
    if not mech.centralized:
        out.append(_from(PAYMENT, cond.mechanism.payment, PAYMENT_TAG, f))
    elif mech.payment_explains:
        out.append(
            Section(PAYMENT_TAG, f"mechanism:{mech.name}", mech.payment_explains.format(**f))
        )
    out.append(Section(EXECUTION, "protocol", _EXECUTION))
    if plan.declarations:
        carry = _BUDGET_RESET if cond.budget.reset_each_subrun else _BUDGET_CARRY
        out.append(Section(BUDGET, "protocol", carry + (_SPENT if charged else "")))
        out.append(Section(PRIVACY, "protocol", _PRIVACY.format(public=_public_things(plan))))
    for key, value, tag in (
        ("memory.enabled", cond.memory.enabled, MEMORY),
        ("memory.reports", cond.memory.reports, REPORTS),
    ):
        s = _switch(key, value, tag, f)
        if s is not None:
            out.append(s)
    return out


def _from_mechanism(kind: str, f: dict[str, Any]) -> Section:
    rule = mechanism_rule(kind)
    return Section(MECHANISM, f"mechanism:{kind}", _ROUND + rule.explains.format(**f))


def _public_things(plan: Plan) -> str:
    things = [] if plan.sealed else ["Bids, declarations, notes"]
    if plan.conversation:
        things.append("public posts")
    if plan.ballots:
        things.append("published ballots")
    things.append("schedules")
    text = ", ".join(things[:-1]) + " and " + things[-1] if len(things) > 1 else things[0]
    return text[0].upper() + text[1:]


def render(sections: list[Section]) -> str:
    """The explanation as agents read it: one paragraph per section, in order."""
    return "\n\n".join(s.text for s in sections)

"""Which phases a condition runs (`Plan`), the explanation agents read, generated from it, and
the taxonomy categories its rules impose.

The arena and the explanation read the same `Plan`, so agents are told about exactly the phases
that run. The explanation is a list of tagged `Section`s, each produced by one registered rule
(`mbb.protocol.rules`) or by the protocol's fixed frame; `explain` is what an LLM negotiator
reads, `explain_solver` what an LLM solver reads, and `render` joins either into text. A test
checks the tags against the events the same condition produces. Every sentence states what the
protocol does; none says what to try.

`imposed(cond)` is the union of the `imposes` of the rules in force: what "mandated" means for
the institutions analysis (never what a classifier finds in the instructions).
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
    "CLAIM",
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
    "WINDOWS",
    "WITHDRAWAL",
    "Plan",
    "Section",
    "clock_of",
    "explain",
    "explain_solver",
    "imposed",
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
WINDOWS = "windows"  # the solver's: how a window is obtained
CLAIM = "claim"  # the solver's: what a submission is and how it is scored


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


def clock_of(cond: Condition) -> str:
    """The condition's time model. An unresolved one (None: the schema's default) is an error:
    the run builder resolves it (`mbb.batch.build.resolve_clock`: charged where a worker is an
    LLM, virtual otherwise), and `mbb.load_params` returns conditions resolved."""
    model = cond.time.model
    if model is None:
        raise ValueError(
            "time.model is not resolved: load the condition with mbb.load_params (or "
            "mbb.batch.build.resolve_clock) before explaining it"
        )
    return model


# What a `charged` clock adds for language-model solvers, by who has one (F-4): their response
# time inside a window uses it up (the run's clock), and outside a window it counts against their
# own worker's deadline (`RunContext.charge_thinking`). A population of other solvers (modeled,
# oracle) has no model time, so nothing is added. Mixed or not known: the sentence that is true
# of any population, which cannot say whether the reader's own solver is a model.
_MODEL_TIME = {
    False: "",
    True: " and by its solver's model response time. Your solver is a language model: its "
    "response time between windows also counts against your deadline",
    None: " and, where that solver is a language model, by its model response time. A "
    "language-model solver's response time between windows also counts against its own "
    "worker's deadline",
}


def _fields(cond: Condition, llm_solvers: bool | None = None) -> dict[str, Any]:
    from mbb.resource.resource import ToolCosts
    from mbb.tasks.harness import CLAIMS_PER_WINDOW, claim_cost_s

    costs = ToolCosts()  # the resource's costs (`mbb.batch.build` keeps its defaults)
    return {
        "model_time": _MODEL_TIME[llm_solvers],
        "planning_turns": cond.llm.solver.planning_turns,
        # the solver's account of a negotiated round names only the phases that run (F-11)
        "negotiators_talk": " may message each other," if plan_of(cond).conversation else "",
        "window_min": cond.windows.min_s,
        "window_max": cond.windows.max_s,
        "max_turns": cond.negotiation.max_turns,
        "quantum_s": cond.mechanism.quantum_s,
        "min_s": cond.windows.min_s,
        "kemeny_max": cond.mechanism.kemeny_exact_max,
        "note_max": cond.negotiation.note_max_chars,
        "message_max": cond.negotiation.message_max_chars,
        "read_s": costs.read,
        "write_s": costs.write,
        "edit_s": costs.edit,
        "bash_s": costs.bash,
        "claim_s": claim_cost_s(costs),
        "claims_per_window": CLAIMS_PER_WINDOW,
    }


def _from(
    registry: Registry[Any], name: str, tag: str, fields: dict[str, Any], *, solver: bool = False
) -> Section:
    rule = registry[name]
    text = rule.solver_explains if solver else rule.explains
    return Section(tag, f"{registry.what}:{name}", text.format(**fields))


def _switch(
    key: str, value: Any, tag: str, fields: dict[str, Any], *, solver: bool = False
) -> Section | None:
    s = _from(SWITCHES[key], switch_value(value), tag, fields, solver=solver)
    return s if s.text else None


_SETTING = (
    "You {act} on behalf of one of {n} coding agents ({population}) that share a single "
    "execution machine; which one is said at the end of these instructions. Each subrun every "
    "worker gets its own programming task and a private deadline. A solver does the actual "
    "work, but it can only run commands (look at the reference program, edit, compile, test) "
    "while it holds an execution window on the shared machine. {part} After the subrun its "
    "submission is scored by the share of the task's hidden tests it passes."
)
_NEGOTIATES = "You negotiate for your solver's windows{afford}."
# a centralized mechanism without bids (fcfs, edf, sjf, round robin) asks the negotiator for
# nothing: "you negotiate" would be false there (mbb's wording; the paper runs these mechanisms
# as replays, without agents)
_ASSIGNED = "The operator assigns the windows by the rule below; you take no part in it."
_DECLARE_PUBLIC = (
    "Declaration (public, simultaneous): a bid in whole credits (0 up to your remaining "
    "budget), a duration in seconds ({window_min}..{window_max}), the position you want in the "
    "schedule (1 = first; it is shown to everyone, and no rule below orders by it), and a "
    "public note (cut to {note_max} characters)."
)
_DECLARE_SEALED = (
    "Declaration (sealed, simultaneous): a bid in whole credits (0 up to your remaining "
    "budget) and a duration in seconds ({window_min}..{window_max}), seen by no one else "
    "before the schedule is published; the position and note you give are recorded but not "
    "shown to anyone."
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
    "early hands the machine to the next one at once; a window ends when its allocation is "
    "used up{cut}. A window allocated 0 s does not run: its holder pays nothing for it and its "
    "solver may ask again."
)
_CUT = {  # what the clock does to a command at a window's end (the solver's rule, in brief)
    "measured": ", and a command still running then is killed",
    "virtual": " (a command that would not fit in what is left is not started)",
    "charged": " (a command that would not fit in what is left is not started)",
}
_TERMINATED_PAYS_NOTHING = " A worker terminated before its window begins pays nothing for it."
_BUDGET_RESET = "Credits: budgets are refilled at the start of every subrun."
_BUDGET_CARRY = "Credits: your budget carries over from one subrun to the next; it is not refilled."
_SPENT = " Credits buy nothing but windows."
# who sees what, and nothing more: "unless you disclose them" offered disclosure as a move
# (a tactic, F-3), and under a sealed mechanism there is no channel to disclose anything in
_PRIVACY = (
    "Privacy: your budget and your deadline are shown to no other worker. {public} are seen by "
    "everyone."
)


def explain(
    cond: Condition, population: list[str] | None = None, *, llm_solvers: bool | None = None
) -> list[Section]:
    """The explanation of `cond` for its negotiators, section by section: only the phases
    that run, each rule by its registered sentences. `population`: the worker ids present
    (default: the first subrun's); `llm_solvers`: every worker's solver is a language model
    (True), none is (False), or mixed or unknown (None); the engine does not know backends, so
    the agents' layer says it (`mbb.agents.backends.llm_solvers`)."""
    plan = plan_of(cond)
    f = _fields(cond, llm_solvers)
    mech = mechanism_rule(cond.mechanism.kind)
    pop = population or [s.id for s in cond.worker_specs() if s.present_in(1)]
    charged = bool(mech.payment_explains) if mech.centralized else cond.mechanism.payment != "none"
    out = [
        Section(
            SETTING,
            "protocol",
            _SETTING.format(
                act="negotiate" if plan.phases else "act",
                n=len(pop),
                population=", ".join(pop),
                part=_NEGOTIATES.format(
                    afford=", paying for them from your worker's credit budget"
                    if charged and plan.declarations
                    else ""
                )
                if plan.phases
                else _ASSIGNED,
            ),
        ),
        _from(TIME_MODELS, clock_of(cond), CLOCK, f),
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
    execution = _EXECUTION.format(cut=_CUT[clock_of(cond)])
    out.append(
        Section(EXECUTION, "protocol", execution + (_TERMINATED_PAYS_NOTHING if charged else ""))
    )
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


_SOLVER_SETTING = (
    "The machine is shared with {n_others} other workers, and you can run commands on it only "
    "while you hold an execution window. Each subrun you get a new task and a private deadline."
)
_SOLVER_WINDOWS = (
    "How you get windows: outside a window you ask for one with `request` (its length, "
    "{window_min}..{window_max} s) and your worker joins the queue. You have {planning_turns} "
    "turn(s) outside a window to call `request` or `withdraw`; without either, a request of "
    "your last requested length this subrun ({window_max} s if none yet) is made for you. A "
    "round starts whenever the machine is idle and workers are queued for it. "
)
_SOLVER_CLAIM = (
    "Your submission is the workspace as you leave it: a script `compile.sh` that builds an "
    "executable file `./executable`. After the subrun it is compiled offline and run against "
    "the task's hidden tests; the score is the share of tests passed. If a completion claim "
    "finds every hidden test passing, the task is completed and the window ends; otherwise you "
    "are told the task is not complete (not which tests fail) and the window goes on."
)


def explain_solver(cond: Condition, n_others: int) -> list[Section]:
    """The explanation of `cond` for its LLM solvers, section by section: the setting, how a
    window is obtained (the mechanism's `solver_explains`), what time costs and how a window
    ends (the time model's), what a submission is and how a completion claim is checked, and
    the memory and report switches. `n_others`: how many other workers share the machine."""
    f = _fields(cond)
    mech = mechanism_rule(cond.mechanism.kind)
    windows = _SOLVER_WINDOWS.format(**f) + mech.solver_explains.format(**f)
    out = [
        Section(SETTING, "protocol", _SOLVER_SETTING.format(n_others=n_others)),
        Section(WINDOWS, f"mechanism:{mech.name}", windows),
        _from(TIME_MODELS, clock_of(cond), CLOCK, f, solver=True),
        Section(CLAIM, "protocol", _SOLVER_CLAIM),
    ]
    for key, value, tag in (
        ("memory.enabled", cond.memory.enabled, MEMORY),
        ("memory.reports", cond.memory.reports, REPORTS),
    ):
        s = _switch(key, value, tag, f, solver=True)
        if s is not None:
            out.append(s)
    return out


def imposed(cond: Condition) -> frozenset[str]:
    """The taxonomy categories the rules in force in `cond` impose (each rule's `imposes`):
    the mechanism's, and under negotiation the aggregation, allocation and payment rules';
    the phase switches and the clock. What a condition mandates, whoever its workers are."""
    plan = plan_of(cond)
    rules: list[Any] = [mechanism_rule(cond.mechanism.kind)]
    if plan.ballots:
        rules += [AGGREGATION[cond.mechanism.aggregation], ALLOCATION[cond.mechanism.allocation]]
    if not rules[0].centralized:
        rules.append(PAYMENT[cond.mechanism.payment])
    neg = cond.negotiation
    for key, value in (
        ("negotiation.conversation", plan.conversation),
        ("negotiation.bids", neg.bids),
        ("negotiation.withdrawal", neg.withdrawal),
        ("negotiation.ballot_reasoning", neg.ballot_reasoning),
        ("memory.enabled", cond.memory.enabled),
        ("memory.reports", cond.memory.reports),
    ):
        rules.append(SWITCHES[key][switch_value(value)])
    if cond.time.model is not None:
        rules.append(TIME_MODELS[cond.time.model])
    out: set[str] = set()
    for r in rules:
        out |= r.imposes
    return frozenset(out)

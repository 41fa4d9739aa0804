"""The three answers an LLM negotiator gives, as a table: for each phase, what the model
returns (a strict model), its JSON schema (with the round's worker ids and, where the endpoint
enforces them, its bounds), how an answer becomes the protocol's action (an answer the
protocol would repair goes back to the model, naming each problem), the stated default when
none comes (`mbb.protocol.scheduling.validation`), and the phase's one-line instruction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from mbb.agents.prompts import negotiator as prompts
from mbb.core.actions import Ballot, ConversationTurn, Declaration, Message, Withdraw
from mbb.core.agent_api import RoundView
from mbb.llm.structured import InvalidOutput, strict_schema
from mbb.protocol.explain import Plan
from mbb.protocol.scheduling.aggregation import tie_break_order
from mbb.protocol.scheduling.validation import (
    DEFAULT_BALLOT,
    DEFAULT_DECLARATION,
    DEFAULT_TURN,
    Issue,
    default_ballot,
    default_declaration,
    repair_ballot,
    repair_declaration,
    repair_message,
)

__all__ = [
    "ASKS",
    "AllocationOut",
    "BallotOut",
    "DeclarationOut",
    "MessageOut",
    "PhaseAsk",
    "RevisionOut",
    "TurnOut",
]


# --- what the model is asked to return (the action models minus scripted-only fields) -----------
class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DeclarationOut(_Out):
    action: Literal["declare", "withdraw"]
    bid: int
    duration: int
    position: int
    note: str


class RevisionOut(_Out):
    bid: int
    duration: int
    position: int
    note: str


class MessageOut(_Out):
    to: str | None
    text: str


class TurnOut(_Out):
    messages: list[MessageOut]
    revision: RevisionOut | None


class AllocationOut(_Out):
    candidate: str
    seconds: int


class BallotOut(_Out):
    ranking: list[str]
    allocations: list[AllocationOut]
    reasoning: str


# --- schema helpers ------------------------------------------------------------------------------
def _patch_enum(node: dict[str, Any], values: list[str]) -> None:
    """Constrain a string (or string|null) property to `values` — grammar-backed servers then
    cannot produce unknown worker ids at all."""
    if "anyOf" in node:
        for branch in node["anyOf"]:
            if branch.get("type") == "string":
                branch["enum"] = list(values)
    else:
        node["enum"] = list(values)


def _bound(node: dict[str, Any], lo: int, hi: int) -> None:
    node["minimum"], node["maximum"] = lo, hi


def _declaration_bounds(props: dict[str, Any], view: RoundView) -> None:
    _bound(props["bid"], 0, view.budget)
    _bound(props["duration"], view.window_min_s, view.window_max_s)
    _bound(props["position"], 1, len(view.candidates))


# what an answer missing some candidates lacks, said as the requirement it breaks: the issue's
# own detail names the arena's repair ("appended", "declared"), which is not what happens to an
# LLM's answer (it is sent back, and a second such answer gets the whole default; F-7)
_MISSING = {
    "append": "must list every candidate exactly once",
    "default": "one entry per candidate is required",
}


def _refuse(issues: list[Issue], prefix: str = "") -> None:
    """Send an answer the protocol would repair back to the model, naming each problem as what
    is wrong, never as a repair (cuts to a length limit are the arena's, recorded there)."""
    problems = [i for i in issues if i.rule != "truncate"]
    if not problems:
        return
    parts: list[str | tuple[str, str]] = []  # a tuple: (field, rule) of a "missing" line
    missing: dict[str, list[str]] = {}
    for i in problems:
        if i.rule in _MISSING:
            if i.field not in missing:
                parts.append((i.field, i.rule))
            names = i.value if isinstance(i.value, list) else [i.value]
            missing.setdefault(i.field, []).extend(map(str, names))
        else:
            parts.append(f"{prefix}{i.field}: {i.detail} (got {i.value!r})")
    text = [
        p
        if isinstance(p, str)
        else f"{prefix}{p[0]}: {_MISSING[p[1]]}; missing: " + ", ".join(missing[p[0]])
        for p in parts
    ]
    raise InvalidOutput("; ".join(text), prefix + problems[0].field)


def bids_and_durations(view: RoundView) -> tuple[dict[str, int], dict[str, int]]:
    """The candidates' declared bids and durations (0 for one that has not declared)."""
    bids, durations = {}, {}
    for w in view.candidates:
        d = view.declarations.get(w)
        bids[w], durations[w] = (d.bid, d.duration) if d is not None else (0, 0)
    return bids, durations


def _check_declaration(view: RoundView, d: RevisionOut | DeclarationOut) -> Declaration:
    """The declaration if the protocol would accept it as it is; an answer it would repair (a
    bid, duration or position out of range) goes back to the model. A note that is too long is
    left to the arena, which cuts it (recorded)."""
    decl = Declaration(bid=d.bid, duration=d.duration, position=d.position, note=d.note, labels=())
    _, issues = repair_declaration(
        decl,
        budget=view.budget,
        min_s=view.window_min_s,
        max_s=view.window_max_s,
        n_candidates=len(view.candidates),
        note_max=len(decl.note),
    )
    _refuse(issues)
    return decl


# --- the three asks ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PhaseAsk:
    """One answer a negotiator gives: `name` (the answer's and the tool's name), `phase` (the
    phase its calls are recorded under), `out_model`, `default_rule` (the stated default), and
    functions of the round: `runs(plan)`, `static_schema(plan)` (the schema the system prompt
    shows), `schema(view, plan, ranges)` (the request's, with the round's ids and bounds),
    `convert(view, plan, worker, out)`, `default(view)` and `instruction(view, worker)`."""

    name: str
    phase: str
    out_model: type[BaseModel]
    default_rule: str
    runs: Callable[[Plan], bool]
    static_schema: Callable[[Plan], dict[str, Any]]
    schema: Callable[[RoundView, Plan, bool], dict[str, Any]]
    convert: Callable[[RoundView, Plan, str, Any], Any]
    default: Callable[[RoundView], Any]
    instruction: Callable[[RoundView, str], str]


def _declaration_static(plan: Plan) -> dict[str, Any]:
    schema = strict_schema(DeclarationOut)
    if not plan.withdrawal:
        schema["properties"]["action"] = {"type": "string", "enum": ["declare"]}
    return schema


def _declaration_schema(view: RoundView, plan: Plan, ranges: bool) -> dict[str, Any]:
    schema = _declaration_static(plan)
    if ranges:
        _declaration_bounds(schema["properties"], view)
    return schema


def _declaration_convert(
    view: RoundView, plan: Plan, worker: str, out: DeclarationOut
) -> Declaration | Withdraw:
    if out.action == "withdraw":
        if not plan.withdrawal:
            raise InvalidOutput("withdrawal is not allowed: action must be declare", "action")
        return Withdraw(reason=out.note or "withdrew")
    return _check_declaration(view, out)


def _turn_static(plan: Plan) -> dict[str, Any]:
    schema = strict_schema(TurnOut)
    if not plan.revisable:
        schema["properties"]["revision"] = {"type": "null"}
    return schema


def _peers(view: RoundView, worker: str) -> list[str]:
    return [w for w in view.population if w != worker]


def _turn_schema(view: RoundView, plan: Plan, ranges: bool) -> dict[str, Any]:
    schema = strict_schema(TurnOut)
    _patch_enum(schema["$defs"]["MessageOut"]["properties"]["to"], _peers(view, view.worker))
    if ranges:
        _declaration_bounds(schema["$defs"]["RevisionOut"]["properties"], view)
    if not view.revisable:
        schema["properties"]["revision"] = {"type": "null"}
    return schema


def _turn_convert(view: RoundView, plan: Plan, worker: str, out: TurnOut) -> ConversationTurn:
    msgs = []
    for i, m in enumerate(out.messages):
        if not m.text.strip():
            continue
        msg, issues = repair_message(
            Message(to=m.to, text=m.text),
            sender=worker,
            population=view.population,
            max_chars=len(m.text),
        )
        _refuse(issues, f"messages.{i}.")
        msgs.append(msg or Message(to=m.to, text=m.text))
    revision = None
    if out.revision is not None:
        if not view.revisable:
            raise InvalidOutput("bids are fixed: revision must be null", "revision")
        revision = _check_declaration(view, out.revision)
    return ConversationTurn(messages=tuple(msgs), revision=revision)


def _ballot_schema(view: RoundView, plan: Plan, ranges: bool) -> dict[str, Any]:
    cands = list(view.candidates)
    _, declared = bids_and_durations(view)
    schema = strict_schema(BallotOut)
    _patch_enum(schema["properties"]["ranking"]["items"], cands)
    _patch_enum(schema["$defs"]["AllocationOut"]["properties"]["candidate"], cands)
    if ranges:
        for key in ("ranking", "allocations"):
            schema["properties"][key]["minItems"] = len(cands)
            schema["properties"][key]["maxItems"] = len(cands)
        top = max(declared.values(), default=view.window_max_s)
        _bound(schema["$defs"]["AllocationOut"]["properties"]["seconds"], 0, top)
    return schema


def _ballot_convert(view: RoundView, plan: Plan, worker: str, out: BallotOut) -> Ballot:
    cands = list(view.candidates)
    bids, declared = bids_and_durations(view)
    if not out.allocations:
        raise InvalidOutput(f"allocations missing for {cands}", "allocations")
    ballot = Ballot(
        ranking=tuple(out.ranking),
        allocations={a.candidate: a.seconds for a in out.allocations},
        reasoning=out.reasoning,
    )
    _, issues = repair_ballot(
        ballot,
        tiebreak=tie_break_order(cands, bids),
        declared=declared,
        reasoning_max=len(out.reasoning),
    )
    _refuse(issues)
    return ballot


def default_ballot_for(view: RoundView) -> Ballot:
    """The protocol's default ballot (as for a failed backend)."""
    bids, declared = bids_and_durations(view)
    return default_ballot(tie_break_order(view.candidates, bids), declared)


ASKS: dict[str, PhaseAsk] = {
    a.name: a
    for a in (
        PhaseAsk(
            name="declaration",
            phase="declaration",
            out_model=DeclarationOut,
            default_rule=DEFAULT_DECLARATION,
            runs=lambda plan: plan.declarations,
            static_schema=_declaration_static,
            schema=_declaration_schema,
            convert=_declaration_convert,
            default=lambda view: default_declaration(view.wanted_s, len(view.candidates)),
            instruction=lambda view, worker: prompts.DECLARE_TURN.format(
                budget=view.budget,
                window_min=view.window_min_s,
                window_max=view.window_max_s,
                n_candidates=len(view.candidates),
            ),
        ),
        PhaseAsk(
            name="conversation_turn",
            phase="conversation",
            out_model=TurnOut,
            default_rule=DEFAULT_TURN,
            runs=lambda plan: plan.conversation,
            static_schema=_turn_static,
            schema=_turn_schema,
            convert=_turn_convert,
            default=lambda view: ConversationTurn(),
            instruction=lambda view, worker: prompts.CONVERSE_TURN.format(
                turn_no=view.turn,
                max_turns=view.max_turns,
                peers=", ".join(_peers(view, worker)),
            ),
        ),
        PhaseAsk(
            name="ballot",
            phase="ballot",
            out_model=BallotOut,
            default_rule=DEFAULT_BALLOT,
            runs=lambda plan: plan.ballots,
            static_schema=lambda plan: strict_schema(BallotOut),
            schema=_ballot_schema,
            convert=_ballot_convert,
            default=default_ballot_for,
            instruction=lambda view, worker: prompts.BALLOT_TURN.format(
                candidates=", ".join(view.candidates),
                durations=", ".join(
                    f"{w} {bids_and_durations(view)[1][w]} s" for w in view.candidates
                ),
            ),
        ),
    )
}

"""An LLM-backed negotiator: prompts in, the same validated action models scripted agents emit.

Each phase is one structured call (plus at most one repair) through `mbb.llm.structured`, so
every call is an `LlmCall` event and every unusable answer becomes a stated default recorded as
`InvalidAction`. The prompt shows the worker only its own private facts (budget, deadline,
remaining work); everything else it sees is public or addressed to it (the `RoundView`).
At the end of a subrun it writes an after-action report and a condensed history into scratch.

Prompt layout (laid out for servers' prefix caches): per worker, a static system prompt (the
rules, then what each phase asks for with its schema), then ONE append-only conversation per
subrun: each call adds a user turn with only what is new since the worker's previous turn (new
rounds, new messages, the current declarations) and the phase's instruction, followed by the
worker's answer (and any repair exchange), exactly as sent. The report and the condensed
history close the subrun's conversation; the next subrun starts a new one from those notes. A
conversation longer than `max_history_chars` is restarted mid-subrun from a full snapshot.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from mbb.core.actions import Ballot, ConversationTurn, Declaration, Message, Withdraw
from mbb.core.agent_api import PastRound, RoundView, SubrunRecap
from mbb.llm import prompts
from mbb.llm.cache import LlmCache
from mbb.llm.client import CallMeta, ChatRequest, Emit, LlmClient, LlmUnavailable
from mbb.llm.config import ModelConfig
from mbb.llm.structured import ActionSpec, InvalidOutput, ask_action, strict_schema, tool_for
from mbb.params import Condition
from mbb.protocol.explain import (
    BALLOT,
    CLOCK,
    CONVERSATION,
    DECLARATION,
    Plan,
    explain,
    plan_of,
    render,
)
from mbb.protocol.history import posts_summary, rounds_summary
from mbb.protocol.scheduling.aggregation import tie_break_order
from mbb.protocol.scheduling.validation import (
    Issue,
    default_ballot,
    default_declaration,
    repair_ballot,
    repair_declaration,
    repair_message,
)

if TYPE_CHECKING:
    from mbb.core.board import Post
    from mbb.core.scratch import Scratch

__all__ = [
    "BallotOut",
    "DeclarationOut",
    "LlmNegotiator",
    "TurnOut",
    "make_llm_negotiator",
    "negotiator_backend",
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


# --- rendering (deterministic: same view → same bytes → same cache key) ------------------------
def _s(seconds: float) -> str:
    return f"{seconds:.0f} s"


def _render_declarations(view: RoundView) -> str:
    if not view.declarations:
        return "No declarations yet this round."
    lines = ["Declarations (public):"]
    for w in view.candidates:
        d = view.declarations.get(w)
        if d is not None:
            who = f"you ({w})" if w == view.worker else w
            lines.append(
                f"- {who}: bid {d.bid}, duration {d.duration} s, wants position "
                f"{d.position}, note: {d.note!r}"
            )
    return "\n".join(lines)


def _recap_fields(recap: SubrunRecap) -> dict[str, Any]:
    """The subrun's outcome as the report prompts' placeholders (one formatting for both)."""
    return {
        "subrun_no": recap.subrun,
        "task": recap.task_id,
        "outcome": recap.outcome,
        "score": f"{recap.score:.2f}",
        "windows": recap.windows,
        "granted": _s(recap.granted_s),
        "used": _s(recap.used_s),
        "waited": _s(recap.waited_s),
        "spent": recap.spent,
        "budget_left": recap.budget_left,
    }


def _render_round(r: PastRound) -> str:
    parts = []
    for pos, w in enumerate(r.order, 1):
        used = f", used {_s(r.used[w])}" if w in r.used else ""
        parts.append(
            f"#{pos} {w} (bid {r.bids.get(w, 0)}, allocated {r.allocations.get(w, 0)} s{used})"
        )
    line = f"- round {r.round}: " + "; ".join(parts)
    if r.ballots:
        ballots = ", ".join(f"{w}: {'>'.join(rk)}" for w, rk in sorted(r.ballots.items()))
        line += f". Ballots: {ballots}"
    if r.reasoning:  # published after the round (negotiation.ballot_reasoning)
        why = "; ".join(f"{w}: {text!r}" for w, text in sorted(r.reasoning.items()) if text)
        if why:
            line += f". Ballot reasoning: {why}"
    return line


def _render_rounds(rounds: list[PastRound], limit: int = 8) -> str:
    """The latest `limit` rounds in full, a summary of the earlier ones of this subrun."""
    if not rounds:
        return "No earlier rounds this subrun."
    shown = rounds[-limit:]
    head = "Earlier rounds this subrun (public):"
    if len(rounds) > limit:
        head = rounds_summary(rounds[:-limit]) + "\n" + head + f" (last {limit} of {len(rounds)})"
    return "\n".join([head, *(_render_round(r) for r in shown)])


def _render_post(p: Post, me: str) -> str:
    author = "you" if p.author == me else p.author
    if p.kind == "note":
        return f"[r{p.round} t{p.turn}] {author} (declaration note): {p.text}"
    if p.kind == "schedule":
        return f"[r{p.round}] schedule: {p.text}"
    if p.to is None:
        return f"[r{p.round} t{p.turn}] {author} → everyone: {p.text}"
    to = "you" if p.to == me else p.to
    return f"[r{p.round} t{p.turn}] {author} → {to} (private): {p.text}"


def _render_posts(posts: Sequence[Post], me: str, subrun: int, limit: int = 40) -> str:
    """This subrun's latest `limit` visible posts in full; the earlier ones counted by author."""
    mine = [p for p in posts if p.subrun == subrun]
    if not mine:
        return "No messages yet this subrun."
    head = "Messages you can see this subrun:"
    if len(mine) > limit:
        head = posts_summary(mine[:-limit], me) + "\n" + head + f" (last {limit} of {len(mine)})"
    return "\n".join([head, *(_render_post(p, me) for p in mine[-limit:])])


def _render_memory(scratch: Scratch | None) -> str:
    if scratch is None or not scratch.entries:
        return ""
    return "Your notes from earlier subruns:\n" + scratch.render()


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


def _refuse(issues: list[Issue], prefix: str = "") -> None:
    """Send an answer the protocol would repair back to the model, naming each problem (cuts
    to a length limit are the arena's, recorded there)."""
    problems = [i for i in issues if i.rule != "truncate"]
    if problems:
        raise InvalidOutput(
            "; ".join(f"{prefix}{i.field}: {i.detail} (got {i.value!r})" for i in problems),
            prefix + problems[0].field,
        )


def _bids_and_durations(view: RoundView) -> tuple[dict[str, int], dict[str, int]]:
    """The candidates' declared bids and durations (0 for one that has not declared)."""
    bids, durations = {}, {}
    for w in view.candidates:
        d = view.declarations.get(w)
        bids[w], durations[w] = (d.bid, d.duration) if d is not None else (0, 0)
    return bids, durations


def _clock_text(cond: Condition) -> str:
    """How time worked in `cond`, as the explanation says it (the registered time model)."""
    return next(s.text for s in explain(cond) if s.tag == CLOCK)


_PHASE_OF = {"declaration": DECLARATION, "conversation_turn": CONVERSATION, "ballot": BALLOT}


@functools.cache
def _view_condition(window_min: int, window_max: int, max_turns: int, revisable: bool) -> Condition:
    return Condition.model_validate(
        {
            "windows": {"min_s": window_min, "max_s": window_max},
            "negotiation": {
                "max_turns": max_turns,
                "bids": "revisable" if revisable else "fixed",
            },
        }
    )


class LlmNegotiator:
    """Negotiator protocol over an OpenAI-compatible model; safe to gather within a phase."""

    concurrent = True

    def __init__(
        self,
        worker: str,
        *,
        config: ModelConfig,
        llm: LlmClient,
        emit: Emit | None = None,
        cache: LlmCache | None = None,
        condition: Condition | None = None,
        report_words: int = 250,
        summary_words: int = 200,
        max_history_chars: int | None = None,
    ) -> None:
        """`condition`: the condition whose rules the prompts explain and whose limits apply;
        without one, the default condition's rules with the view's window bounds, turns and
        bid revision (a negotiator driven by hand-built views)."""
        self.worker = worker
        self.config = config
        self.llm = llm
        self.emit = emit
        self.cache = cache
        self.condition = condition
        self.report_words = report_words
        self.summary_words = summary_words
        self.max_history_chars = (
            config.history_chars if max_history_chars is None else max_history_chars
        )
        self._last_view: RoundView | None = None  # for the end-of-subrun transcript
        # this subrun's conversation, as sent (append-only), and what it has shown so far
        self._system: str | None = None
        self._history: list[dict[str, Any]] = []
        self._history_chars = 0
        self._subrun: int | None = None
        self._seen_seq = -1  # last post shown
        self._seen_rounds = 0  # past rounds shown
        self._snapshot = False  # the next turn restarts a compacted conversation
        self._shown: dict[str, str] = {}  # situation / candidates / declarations last shown

    # --- the condition ---------------------------------------------------------------------------
    def condition_for(self, view: RoundView) -> Condition:
        """The condition the prompts explain (see `__init__`)."""
        if self.condition is not None:
            return self.condition
        return _view_condition(view.window_min_s, view.window_max_s, view.max_turns, view.revisable)

    def plan(self, view: RoundView) -> Plan:
        return plan_of(self.condition_for(view))

    # --- prompts -------------------------------------------------------------------------------
    def system_prompt(self, view: RoundView) -> str:
        """The static part: the condition's rules (generated through the protocol's registry:
        only the phases that run), what each of those phases' answers must contain and how to
        answer, then which worker this is. The same bytes for every call of this worker in a
        condition, and the same for all workers up to the last paragraph."""
        cond = self.condition_for(view)
        plan = plan_of(cond)
        rules = render(explain(cond, list(view.population)))
        if plan.conversation:
            rules += "\n" + prompts.CLOSING_CONVERSATION
        identity = prompts.IDENTITY.format(worker=self.worker)
        return rules + self._phases_prompt(view, plan) + self._answers_prompt(view, plan) + identity

    def _phases_prompt(self, view: RoundView, plan: Plan) -> str:
        if not plan.phases:
            return ""
        parts = [prompts.PHASES_HEAD]
        fields = {"window_min": view.window_min_s, "window_max": view.window_max_s}
        if plan.declarations:
            sealed = prompts.PHASE_DECLARATION_SEALED if plan.sealed else prompts.PHASE_DECLARATION
            parts.append(sealed.format(**fields))
            if plan.withdrawal:
                parts.append(prompts.PHASE_WITHDRAW)
        if plan.conversation:
            hint = prompts.REVISION_HINT_ALLOWED if plan.revisable else prompts.REVISION_HINT_FIXED
            parts.append(
                prompts.PHASE_CONVERSATION.format(max_turns=view.max_turns, revision_hint=hint)
            )
        if plan.ballots:
            parts.append(
                prompts.PHASE_BALLOT.format(
                    agreed=prompts.BALLOT_AGREED if plan.conversation else "",
                    published=(
                        prompts.BALLOT_PUBLISHED
                        if plan.reasoning_published
                        else prompts.BALLOT_SECRET
                    ),
                )
            )
        return "".join(parts)

    def _static_schemas(self, view: RoundView, plan: Plan) -> dict[str, dict[str, Any]]:
        """The schemas of the answers this condition asks for, without the round's enums and
        bounds (those go into the request's response_format, not part of the prompt text)."""
        out: dict[str, dict[str, Any]] = {}
        if plan.declarations:
            decl = strict_schema(DeclarationOut)
            if not plan.withdrawal:
                decl["properties"]["action"] = {"type": "string", "enum": ["declare"]}
            out["declaration"] = decl
        if plan.conversation:
            turn = strict_schema(TurnOut)
            if not plan.revisable:
                turn["properties"]["revision"] = {"type": "null"}
            out["conversation_turn"] = turn
        if plan.ballots:
            out["ballot"] = strict_schema(BallotOut)
        return out

    def _answers_prompt(self, view: RoundView, plan: Plan) -> str:
        schemas = self._static_schemas(view, plan)
        if not schemas:
            return ""
        if self.config.tool_protocol == "native":
            text = prompts.ANSWERS_TOOLS.format(
                answers=", ".join(
                    prompts.ANSWER_TOOL_ITEM.format(name=k, phase=_PHASE_OF[k].upper())
                    for k in schemas
                )
            )
        else:
            text = prompts.ANSWERS_JSON_HEAD + "".join(
                prompts.ANSWER_JSON_ITEM.format(
                    name=k, phase=_PHASE_OF[k].upper(), schema=json.dumps(v, separators=(",", ":"))
                )
                for k, v in schemas.items()
            )
        ends = [prompts.END_REPORT] if plan.reports else []
        if plan.memory:
            ends.append(prompts.END_SUMMARY)
        if ends:
            text += prompts.END_OF_SUBRUN.format(
                what=" and ".join(ends), they="they become" if len(ends) > 1 else "it becomes"
            )
        return text

    def _tools(self, view: RoundView) -> list[dict[str, Any]] | None:
        """Native protocol: the same tools on every call (their schemas are part of the prompt
        prefix a server caches); the round's constraints are checked on the answer."""
        if self.config.tool_protocol != "native":
            return None
        return [tool_for(k, v) for k, v in self._static_schemas(view, self.plan(view)).items()]

    # --- the conversation ----------------------------------------------------------------------
    def _reset(self, subrun: int | None) -> None:
        self._history, self._history_chars = [], 0
        self._subrun, self._seen_seq, self._seen_rounds = subrun, -1, 0
        self._snapshot = False
        self._shown = {}

    def _changed(self, key: str, text: str) -> str:
        """`text` if it differs from what this conversation last showed under `key`, else ''."""
        if self._shown.get(key) == text:
            return ""
        self._shown[key] = text
        return text

    def _append(self, messages: Any) -> None:
        for m in messages:
            self._history.append(m)
            self._history_chars += len(m.get("content") or "")

    def _news(self, view: RoundView) -> str:
        """What is new since this worker's previous turn (everything, on a fresh start)."""
        parts = []
        mine = [p for p in view.posts if p.subrun == view.subrun]
        if self._snapshot:  # the notes are in the turn's head
            parts.append(_render_rounds(view.past_rounds))
            parts.append(_render_posts(mine, self.worker, view.subrun))
        else:
            fresh_rounds = view.past_rounds[self._seen_rounds :]
            if fresh_rounds:
                parts.append(
                    "Rounds finished since your last turn (public):\n"
                    + "\n".join(_render_round(r) for r in fresh_rounds)
                )
            fresh_posts = [p for p in mine if p.seq > self._seen_seq]
            if fresh_posts:
                parts.append(
                    "New messages you can see:\n"
                    + "\n".join(_render_post(p, self.worker) for p in fresh_posts)
                )
        if view.declarations:
            parts.append(self._changed("declarations", _render_declarations(view)))
        self._seen_rounds = len(view.past_rounds)
        self._seen_seq = max((p.seq for p in mine), default=self._seen_seq)
        return "".join(p + "\n" for p in parts if p)

    def _turn_message(self, view: RoundView, phase: str, name: str, instruction: str) -> str:
        head = ""
        if not self._history:
            memory = _render_memory(view.scratch) or "You have no notes from earlier subruns."
            if self._snapshot:
                head = f"(The conversation so far was condensed; the state follows.)\n{memory}\n"
            else:
                head = (
                    prompts.SUBRUN_START.format(
                        subrun_no=view.subrun, subruns_total=view.subruns_total, memory=memory
                    ).rstrip()
                    + "\n"
                )
        answer = (
            prompts.ANSWER_TOOL if self.config.tool_protocol == "native" else prompts.ANSWER_JSON
        ).format(name=name)
        situation = prompts.SITUATION.format(
            now=_s(view.now_s),
            budget=view.budget,
            time_left=_s(view.time_left_s),
            deadline=_s(view.deadline_s),
            need=_s(view.need_s),
            wanted=view.wanted_s,
        )
        lines = [
            prompts.TURN_HEAD.format(subrun_no=view.subrun, round_no=view.round),
            self._changed("situation", situation),
            self._changed(
                "candidates", prompts.CANDIDATES.format(candidates=", ".join(view.candidates))
            ),
            self._news(view).rstrip("\n"),
            instruction,
            answer,
        ]
        body = "\n".join(x for x in lines if x)
        return head + body

    def _conversation(self, view: RoundView) -> list[dict[str, Any]]:
        """[system, *history] for this worker, restarted at a new subrun, a new system prompt,
        or when it has grown past `max_history_chars` (then from a full snapshot)."""
        system = self.system_prompt(view)
        if system != self._system or view.subrun != self._subrun:
            self._system = system
            self._reset(view.subrun)
        elif self._history_chars > self.max_history_chars:
            self._reset(view.subrun)
            self._snapshot = True
        return [{"role": "system", "content": system}, *self._history]

    async def _ask(
        self, view: RoundView, phase: str, instruction: str, spec: ActionSpec[Any, Any]
    ) -> Any:
        convo = self._conversation(view)
        snapshot = self._snapshot
        user = {
            "role": "user",
            "content": self._turn_message(view, phase, spec.name, instruction),
        }
        if snapshot:
            self._snapshot = False
        outcome = await ask_action(
            self.llm,
            self.config,
            [*convo, user],
            spec,
            meta=self._meta(view, phase),
            emit=self.emit,
            cache=self.cache,
            instruct=False,
        )
        self._append([user, *outcome.exchange])
        return outcome.action

    @property
    def _ranges_in_schema(self) -> bool:
        """Numeric/array bounds go into the schema where they help (llama.cpp grammars enforce
        them; prompt-only models read them) but not into OpenAI strict schemas, where support
        for these keywords varies by model and an unsupported one fails the whole request."""
        return self.config.tool_protocol == "json_action" and self.config.structured != (
            "json_schema"
        )

    def _meta(self, view: RoundView, phase: str, role: str = "negotiator") -> CallMeta:
        return CallMeta(self.worker, role, phase, subrun=view.subrun, round=view.round)

    # --- validation against the round: the protocol's own rules (protocol.scheduling.validation)
    def _check_declaration(self, view: RoundView, d: RevisionOut | DeclarationOut) -> Declaration:
        """The declaration if the protocol would accept it as it is; an answer it would repair
        (a bid, duration or position out of range) goes back to the model. A note that is too
        long is left to the arena, which cuts it (recorded)."""
        decl = Declaration(
            bid=d.bid, duration=d.duration, position=d.position, note=d.note, labels=()
        )
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

    def default_declaration(self, view: RoundView) -> Declaration:
        """The protocol's default declaration (as for a failed backend)."""
        return default_declaration(view.wanted_s, len(view.candidates))

    def default_ballot(self, view: RoundView) -> Ballot:
        """The protocol's default ballot (as for a failed backend)."""
        bids, declared = _bids_and_durations(view)
        return default_ballot(tie_break_order(view.candidates, bids), declared)

    # --- phases --------------------------------------------------------------------------------
    async def declare(self, view: RoundView) -> Declaration | Withdraw:
        self._last_view = view
        withdrawal = self.plan(view).withdrawal

        def convert(out: DeclarationOut) -> Declaration | Withdraw:
            if out.action == "withdraw":
                if not withdrawal:
                    raise InvalidOutput(
                        "withdrawal is not allowed: action must be declare", "action"
                    )
                return Withdraw(reason=out.note or "withdrew")
            return self._check_declaration(view, out)

        schema = strict_schema(DeclarationOut)
        if not withdrawal:
            schema["properties"]["action"] = {"type": "string", "enum": ["declare"]}
        if self._ranges_in_schema:
            _declaration_bounds(schema["properties"], view)
        spec: ActionSpec[DeclarationOut, Declaration | Withdraw] = ActionSpec(
            name="declaration",
            out_model=DeclarationOut,
            convert=convert,
            default=self.default_declaration(view),
            default_rule="bid 0 for the solver's wanted duration at the last position",
            schema=schema,
            tools=self._tools(view),
        )
        instruction = prompts.DECLARE_TURN.format(
            budget=view.budget,
            window_min=view.window_min_s,
            window_max=view.window_max_s,
            n_candidates=len(view.candidates),
        )
        return await self._ask(view, "declaration", instruction, spec)

    async def converse(self, view: RoundView) -> ConversationTurn:
        self._last_view = view
        peers = [w for w in view.population if w != self.worker]

        def convert(out: TurnOut) -> ConversationTurn:
            msgs = []
            for i, m in enumerate(out.messages):
                if not m.text.strip():
                    continue
                msg, issues = repair_message(
                    Message(to=m.to, text=m.text),
                    sender=self.worker,
                    population=view.population,
                    max_chars=len(m.text),
                )
                _refuse(issues, f"messages.{i}.")
                msgs.append(msg or Message(to=m.to, text=m.text))
            revision = None
            if out.revision is not None:
                if not view.revisable:
                    raise InvalidOutput("bids are fixed: revision must be null", "revision")
                revision = self._check_declaration(view, out.revision)
            return ConversationTurn(messages=tuple(msgs), revision=revision)

        schema = strict_schema(TurnOut)
        _patch_enum(schema["$defs"]["MessageOut"]["properties"]["to"], peers)
        if self._ranges_in_schema:
            _declaration_bounds(schema["$defs"]["RevisionOut"]["properties"], view)
        if not view.revisable:
            schema["properties"]["revision"] = {"type": "null"}
        spec: ActionSpec[TurnOut, ConversationTurn] = ActionSpec(
            name="conversation_turn",
            out_model=TurnOut,
            convert=convert,
            default=ConversationTurn(),
            default_rule="pass (no messages, no revision)",
            schema=schema,
            tools=self._tools(view),
        )
        instruction = prompts.CONVERSE_TURN.format(
            turn_no=view.turn, max_turns=view.max_turns, peers=", ".join(peers)
        )
        return await self._ask(view, "conversation", instruction, spec)

    async def vote(self, view: RoundView) -> Ballot:
        self._last_view = view
        cands = list(view.candidates)
        bids, declared = _bids_and_durations(view)
        tiebreak = tie_break_order(cands, bids)

        def convert(out: BallotOut) -> Ballot:
            if not out.allocations:
                raise InvalidOutput(f"allocations missing for {cands}", "allocations")
            ballot = Ballot(
                ranking=tuple(out.ranking),
                allocations={a.candidate: a.seconds for a in out.allocations},
                reasoning=out.reasoning,
            )
            _, issues = repair_ballot(
                ballot, tiebreak=tiebreak, declared=declared, reasoning_max=len(out.reasoning)
            )
            _refuse(issues)
            return ballot

        schema = strict_schema(BallotOut)
        _patch_enum(schema["properties"]["ranking"]["items"], cands)
        _patch_enum(schema["$defs"]["AllocationOut"]["properties"]["candidate"], cands)
        if self._ranges_in_schema:
            for key in ("ranking", "allocations"):
                schema["properties"][key]["minItems"] = len(cands)
                schema["properties"][key]["maxItems"] = len(cands)
            top = max(declared.values(), default=view.window_max_s)
            _bound(schema["$defs"]["AllocationOut"]["properties"]["seconds"], 0, top)
        spec: ActionSpec[BallotOut, Ballot] = ActionSpec(
            name="ballot",
            out_model=BallotOut,
            convert=convert,
            default=self.default_ballot(view),
            default_rule="rank by declared bid (ties by queue order), allocate declared durations",
            schema=schema,
            tools=self._tools(view),
        )
        instruction = prompts.BALLOT_TURN.format(
            candidates=", ".join(cands),
            durations=", ".join(f"{w} {declared[w]} s" for w in cands),
        )
        return await self._ask(view, "ballot", instruction, spec)

    # --- subrun boundaries -----------------------------------------------------------------------
    async def start_subrun(self, subrun: int, scratch: Scratch | None) -> None:
        """Called by the arena (beyond the protocol): forget the previous subrun's transcript."""
        self._last_view = None

    async def _free_text(self, system: str, user: str, meta: CallMeta) -> str | None:
        req = ChatRequest(
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}]
        )
        try:
            res = await self.llm.call(self.config, req, meta=meta, emit=self.emit, cache=self.cache)
        except LlmUnavailable:
            return None  # recorded in the LlmCall event; the arena sees no new scratch entry
        text = (res.text or "").strip()
        return text or None

    async def end_subrun(self, recap: SubrunRecap, scratch: Scratch | None) -> None:
        """Write an after-action report (reports on) and a condensed history (memory on) into
        scratch; each is asked for only if scratch keeps it (`Scratch.accepts`).

        Both close this subrun's conversation (their prefix is the whole negotiation, already
        sent); the next subrun starts a new conversation from them."""
        view, self._last_view = self._last_view, None
        if scratch is None or not (scratch.accepts("report") or scratch.accepts("summary")):
            self._reset(None)
            return
        if view is None or view.subrun != recap.subrun or self._system is None:
            await self._standalone_reports(recap, scratch, view)
            self._reset(None)
            return
        rounds = "\n".join(_render_round(r) for r in recap.rounds) or "(no rounds)"
        system = {"role": "system", "content": self._system}
        report_user = {
            "role": "user",
            "content": prompts.REPORT_TURN.format(
                **_recap_fields(recap),
                subruns_total=view.subruns_total,
                rounds=rounds,
                max_words=self.report_words,
            ),
        }
        report = summary = None
        if scratch.accepts("report"):
            meta_r = CallMeta(self.worker, "report", "report", subrun=recap.subrun)
            report = await self._free_text_messages([system, *self._history, report_user], meta_r)
            self._append([report_user, {"role": "assistant", "content": report or "(no report)"}])
        if scratch.accepts("summary"):
            previous = "\n".join(e.text for e in scratch.of_kind("summary")[-1:]) or "(none)"
            summary_user = {
                "role": "user",
                "content": prompts.SUMMARY_TURN.format(
                    previous=previous, max_words=self.summary_words
                ),
            }
            meta_s = CallMeta(self.worker, "summary", "summary", subrun=recap.subrun)
            summary = await self._free_text_messages([system, *self._history, summary_user], meta_s)
        self._reset(None)
        if report:
            scratch.write("report", recap.subrun, report)
        if summary:
            scratch.write("summary", recap.subrun, summary)

    async def _free_text_messages(
        self, messages: list[dict[str, Any]], meta: CallMeta
    ) -> str | None:
        req = ChatRequest(messages=messages)
        try:
            res = await self.llm.call(self.config, req, meta=meta, emit=self.emit, cache=self.cache)
        except LlmUnavailable:
            return None  # recorded in the LlmCall event; the arena sees no new scratch entry
        text = (res.text or "").strip()
        return text or None

    async def _standalone_reports(
        self, recap: SubrunRecap, scratch: Scratch, view: RoundView | None
    ) -> None:
        """Report and summary for a subrun this worker never negotiated in (no conversation)."""
        rounds = "\n".join(_render_round(r) for r in recap.rounds) or "(no rounds)"
        transcript = (
            _render_posts(view.posts, self.worker, recap.subrun, limit=60)
            if view is not None
            else "(none)"
        )
        memory = scratch.render() or "(none)"
        subruns_total = view.subruns_total if view is not None else 0
        report_user = prompts.REPORT_USER.format(
            **_recap_fields(recap),
            worker=self.worker,
            subruns_total=subruns_total or "?",
            memory=memory,
            rounds=rounds,
            transcript=transcript,
        )
        report = summary = None
        if scratch.accepts("report"):
            meta_r = CallMeta(self.worker, "report", "report", subrun=recap.subrun)
            report = await self._free_text(
                prompts.REPORT_SYSTEM.format(
                    worker=self.worker,
                    max_words=self.report_words,
                    clock=_clock_text(self.condition or Condition.model_validate({})),
                ),
                report_user,
                meta_r,
            )
        if scratch.accepts("summary"):
            previous = "\n".join(e.text for e in scratch.of_kind("summary")[-1:]) or "(none)"
            summary_user = prompts.SUMMARY_USER.format(
                previous=previous, subrun_no=recap.subrun, rounds=rounds, transcript=transcript
            )
            meta_s = CallMeta(self.worker, "summary", "summary", subrun=recap.subrun)
            summary = await self._free_text(
                prompts.SUMMARY_SYSTEM.format(worker=self.worker, max_words=self.summary_words),
                summary_user,
                meta_s,
            )
        if report:
            scratch.write("report", recap.subrun, report)
        if summary:
            scratch.write("summary", recap.subrun, summary)


def make_llm_negotiator(
    worker: str,
    *,
    config: ModelConfig,
    llm: LlmClient,
    emit: Emit | None,
    cache: LlmCache | None,
    condition: Condition | None = None,
) -> LlmNegotiator:
    """The arena's entry point; `condition` (optional) is the condition whose rules the prompts
    explain (see `LlmNegotiator`)."""
    return LlmNegotiator(
        worker, config=config, llm=llm, emit=emit, cache=cache, condition=condition
    )


def negotiator_backend(llm: LlmClient, cache: LlmCache | None) -> Callable[..., LlmNegotiator]:
    """A factory with the arena's backend signature `(arena, spec, rng)`; register it as
    `NEGOTIATOR_BACKENDS["llm"]`. Reads `arena.condition.models[spec.model]` and `arena.log`."""

    def factory(arena: Any, spec: Any, rng: Any) -> LlmNegotiator:
        cond = arena.condition
        return make_llm_negotiator(
            spec.id,
            config=cond.models[spec.model],
            llm=llm,
            emit=arena.log.emit,
            cache=cache,
            condition=cond,
        )

    return factory

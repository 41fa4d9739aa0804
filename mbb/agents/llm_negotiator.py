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

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from mbb.agents.base import PastRound, RoundView, SubrunRecap
from mbb.llm import prompts
from mbb.llm.cache import LlmCache
from mbb.llm.client import CallMeta, ChatRequest, Emit, LlmClient, LlmUnavailable
from mbb.llm.config import ModelConfig
from mbb.llm.structured import ActionSpec, InvalidOutput, ask_action, strict_schema, tool_for
from mbb.scheduling.actions import Ballot, ConversationTurn, Declaration, Message, Withdraw

if TYPE_CHECKING:
    from mbb.board import Post
    from mbb.params import Condition
    from mbb.scratch import Scratch

__all__ = [
    "BallotOut",
    "DeclarationOut",
    "LlmNegotiator",
    "RulesText",
    "TurnOut",
    "make_llm_negotiator",
    "negotiator_backend",
    "rules_from_condition",
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


# --- condition-specific rule sentences for the explainer ---------------------------------------
@dataclass(frozen=True)
class RulesText:
    aggregation: str = (
        "the order that best agrees with all ballots wins; ties are broken by bid, then by "
        "queue order. Each window gets the median of the allocations ballots gave it, capped "
        "at its declared duration."
    )
    payment: str = "Each holder pays its own bid when its window begins."
    budget_rule: str = "your budget carries over from one subrun to the next."


_AGGREGATION = {
    "kemeny": "the order that agrees with the most pairwise preferences across all ballots "
    "wins (Kemeny); ties are broken by bid, then by queue order.",
    "borda": "positions on the ballots are scored (Borda count) and the highest total goes "
    "first; ties are broken by bid, then by queue order.",
    "price_only": "the schedule is ordered by declared bid, highest first; ties by queue order "
    "(ballots are recorded but do not change the order).",
    "consensus_else_price": "if all ballots agree, that order is used; otherwise candidates "
    "are ordered by declared bid, highest first, ties by queue order.",
}
_PAYMENT = {
    "pay_your_bid": "Each holder pays its own bid when its window begins.",
    "next_price": "Each holder pays the next-highest bid in the schedule when its window begins.",
    "none": "No credits are charged in this condition; bids only signal priority.",
}


def rules_from_condition(cond: Condition) -> RulesText:
    alloc = (
        " Each window gets the median of the allocations ballots gave it, capped at its "
        "declared duration."
        if cond.mechanism.allocation == "median_ballot"
        else " Each window gets its declared duration."
    )
    budget = (
        "budgets are refilled at the start of every subrun."
        if cond.budget.reset_each_subrun
        else "your budget carries over from one subrun to the next; it is not refilled."
    )
    return RulesText(
        aggregation=_AGGREGATION[cond.mechanism.aggregation] + alloc,
        payment=_PAYMENT[cond.mechanism.payment],
        budget_rule=budget,
    )


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
    return line


def _render_rounds(rounds: list[PastRound], limit: int = 8) -> str:
    if not rounds:
        return "No earlier rounds this subrun."
    shown = rounds[-limit:]
    head = "Earlier rounds this subrun (public):"
    if len(rounds) > limit:
        head += f" (last {limit} of {len(rounds)})"
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


def _render_posts(posts: list[Post], me: str, subrun: int, limit: int = 40) -> str:
    mine = [p for p in posts if p.subrun == subrun]
    if not mine:
        return "No messages yet this subrun."
    head = "Messages you can see this subrun:"
    if len(mine) > limit:
        head += f" (last {limit} of {len(mine)})"
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
        rules: RulesText | None = None,
        note_max_chars: int = 280,
        message_max_chars: int = 600,
        report_words: int = 250,
        summary_words: int = 200,
        max_history_chars: int | None = None,
    ) -> None:
        self.worker = worker
        self.config = config
        self.llm = llm
        self.emit = emit
        self.cache = cache
        self.rules = rules or RulesText()
        self.note_max_chars = note_max_chars
        self.message_max_chars = message_max_chars
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

    # --- prompts -------------------------------------------------------------------------------
    def system_prompt(self, view: RoundView) -> str:
        """The static part: the rules, then how to answer (with the schemas where the endpoint
        needs them in the text), then which worker this is. The same bytes for every call of
        this worker in a condition, and the same for all workers up to the last paragraph."""
        phases = prompts.PHASES.format(
            window_min=view.window_min_s,
            window_max=view.window_max_s,
            max_turns=view.max_turns,
            revision_hint=(
                prompts.REVISION_HINT_ALLOWED if view.revisable else prompts.REVISION_HINT_FIXED
            ),
        )
        identity = prompts.IDENTITY.format(worker=self.worker)
        return self._rules_prompt(view) + phases + self._answers_prompt(view) + identity

    def _rules_prompt(self, view: RoundView) -> str:
        return prompts.EXPLAINER.format(
            worker=self.worker,
            n_workers=len(view.population),
            population=", ".join(view.population),
            window_min=view.window_min_s,
            window_max=view.window_max_s,
            max_turns=view.max_turns,
            revision_rule=prompts.REVISION_ALLOWED if view.revisable else prompts.REVISION_FIXED,
            aggregation=self.rules.aggregation,
            payment=self.rules.payment,
            budget_rule=self.rules.budget_rule,
        )

    def _static_schemas(self, view: RoundView) -> dict[str, dict[str, Any]]:
        """The three answers' schemas without the round's enums and bounds (those go into the
        request's response_format, which is not part of the prompt text)."""
        turn = strict_schema(TurnOut)
        if not view.revisable:
            turn["properties"]["revision"] = {"type": "null"}
        return {
            "declaration": strict_schema(DeclarationOut),
            "conversation_turn": turn,
            "ballot": strict_schema(BallotOut),
        }

    def _answers_prompt(self, view: RoundView) -> str:
        if self.config.tool_protocol == "native":
            return prompts.ANSWERS_TOOLS
        return prompts.ANSWERS_JSON.format(
            **{
                k: json.dumps(v, separators=(",", ":"))
                for k, v in self._static_schemas(view).items()
            }
        )

    def _tools(self, view: RoundView) -> list[dict[str, Any]] | None:
        """Native protocol: the same three tools on every call (their schemas are part of the
        prompt prefix a server caches); the round's constraints are checked on the answer."""
        if self.config.tool_protocol != "native":
            return None
        return [tool_for(k, v) for k, v in self._static_schemas(view).items()]

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

    # --- validation against the round ------------------------------------------------------------
    def _check_declaration(self, view: RoundView, d: RevisionOut | DeclarationOut) -> Declaration:
        n = len(view.candidates)
        problems = []
        if not 0 <= d.bid <= view.budget:
            problems.append(f"bid must be between 0 and your budget {view.budget}, got {d.bid}")
        if not view.window_min_s <= d.duration <= view.window_max_s:
            problems.append(
                f"duration must be between {view.window_min_s} and {view.window_max_s} s, "
                f"got {d.duration}"
            )
        if not 1 <= d.position <= n:
            problems.append(f"position must be between 1 and {n}, got {d.position}")
        if problems:
            raise InvalidOutput("; ".join(problems), "bid" if "bid" in problems[0] else "duration")
        return Declaration(
            bid=d.bid, duration=d.duration, position=d.position, note=d.note[: self.note_max_chars]
        )

    def default_declaration(self, view: RoundView) -> Declaration:
        dur = min(max(view.wanted_s, view.window_min_s), view.window_max_s)
        return Declaration(bid=0, duration=dur, position=len(view.candidates), note="")

    def default_ballot(self, view: RoundView) -> Ballot:
        bids = {w: (d.bid if (d := view.declarations.get(w)) else 0) for w in view.candidates}
        order = sorted(view.candidates, key=lambda w: (-bids[w], view.candidates.index(w)))
        alloc = {w: view.declarations[w].duration if w in view.declarations else 0 for w in order}
        return Ballot(
            ranking=tuple(order),
            allocations=alloc,
            reasoning="default ballot: ordered by declared bid, ties by queue order",
            defaulted=True,
        )

    # --- phases --------------------------------------------------------------------------------
    async def declare(self, view: RoundView) -> Declaration | Withdraw:
        self._last_view = view

        def convert(out: DeclarationOut) -> Declaration | Withdraw:
            if out.action == "withdraw":
                return Withdraw(reason=out.note[: self.note_max_chars] or "withdrew")
            return self._check_declaration(view, out)

        schema = strict_schema(DeclarationOut)
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
                if m.to is not None and m.to not in peers:
                    raise InvalidOutput(
                        f"messages[{i}].to must be one of {peers} or null, got {m.to!r}",
                        f"messages.{i}.to",
                    )
                if not m.text.strip():
                    continue
                msgs.append(Message(to=m.to, text=m.text[: self.message_max_chars]))
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
        declared = {w: (d.duration if (d := view.declarations.get(w)) else 0) for w in cands}

        def convert(out: BallotOut) -> Ballot:
            if sorted(out.ranking) != sorted(cands):
                raise InvalidOutput(
                    f"ranking must contain each of {cands} exactly once, got {out.ranking}",
                    "ranking",
                )
            alloc: dict[str, int] = {}
            for a in out.allocations:
                if a.candidate not in declared:
                    raise InvalidOutput(f"allocation for unknown candidate {a.candidate!r}")
                if not 0 <= a.seconds <= declared[a.candidate]:
                    raise InvalidOutput(
                        f"allocation for {a.candidate} must be 0..{declared[a.candidate]} s "
                        f"(its declared duration), got {a.seconds}",
                        "allocations",
                    )
                alloc[a.candidate] = a.seconds
            missing = [w for w in cands if w not in alloc]
            if missing:
                raise InvalidOutput(f"allocations missing for {missing}", "allocations")
            return Ballot(ranking=tuple(out.ranking), allocations=alloc, reasoning=out.reasoning)

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
        """Write an after-action report and a condensed history into scratch (memory on).

        Both close this subrun's conversation (their prefix is the whole negotiation, already
        sent); the next subrun starts a new conversation from them."""
        view, self._last_view = self._last_view, None
        if scratch is None:
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
        meta_r = CallMeta(self.worker, "report", "report", subrun=recap.subrun)
        report = await self._free_text_messages([system, *self._history, report_user], meta_r)
        self._append([report_user, {"role": "assistant", "content": report or "(no report)"}])
        previous = "\n".join(e.text for e in scratch.of_kind("summary")[-1:]) or "(none)"
        summary_user = {
            "role": "user",
            "content": prompts.SUMMARY_TURN.format(previous=previous, max_words=self.summary_words),
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
        meta_r = CallMeta(self.worker, "report", "report", subrun=recap.subrun)
        report = await self._free_text(
            prompts.REPORT_SYSTEM.format(worker=self.worker, max_words=self.report_words),
            report_user,
            meta_r,
        )
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
    """The arena's entry point; `condition` (optional) tailors the explainer and length limits."""
    if condition is None:
        return LlmNegotiator(worker, config=config, llm=llm, emit=emit, cache=cache)
    neg = condition.negotiation
    return LlmNegotiator(
        worker,
        config=config,
        llm=llm,
        emit=emit,
        cache=cache,
        rules=rules_from_condition(condition),
        note_max_chars=neg.note_max_chars,
        message_max_chars=neg.message_max_chars,
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

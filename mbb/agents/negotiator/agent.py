"""An LLM-backed negotiator, from components: its prompts (`NegotiatorPrompt`), its
conversation with compaction (`Conversation`) and the table of phase asks (`ASKS`).

Each phase is one structured call (plus at most one repair) through `mbb.llm.structured`, so
every call is an `LlmCall` event and every unusable answer becomes the phase's stated default,
recorded as `InvalidAction`. The prompt shows the worker only its own private facts (budget,
deadline, remaining work); everything else it sees is public or addressed to it (the
`RoundView`). At the end of a subrun it writes an after-action report and a condensed history
into scratch; both close the subrun's conversation, and the next subrun starts a new one from
those notes.
"""

from __future__ import annotations

from typing import Any

from mbb.agents.negotiator.asks import ASKS, PhaseAsk
from mbb.agents.negotiator.conversation import Conversation
from mbb.agents.negotiator.prompt import NegotiatorPrompt
from mbb.agents.prompts import negotiator as prompts
from mbb.core.actions import Ballot, ConversationTurn, Declaration, Withdraw
from mbb.core.agent_api import RoundView, SubrunRecap
from mbb.core.scratch import Scratch
from mbb.llm.cache import LlmCache
from mbb.llm.client import CallMeta, ChatRequest, Emit, LlmClient, LlmUnavailable
from mbb.llm.config import ModelConfig
from mbb.llm.structured import ActionSpec, ask_action
from mbb.params import Condition
from mbb.protocol.explain import Plan

__all__ = ["LlmNegotiator", "make_llm_negotiator"]


class LlmNegotiator:
    """Negotiator protocol over an OpenAI-compatible model; safe to gather within a phase.

    `config`: the worker's model config; `llm`, `cache`: the run's client and request cache;
    `emit`: the run's event log; `condition`: the condition whose rules the prompts explain and
    whose limits apply (None: see `NegotiatorPrompt`); `report_words`, `summary_words`: length
    caps asked of the end-of-subrun notes; `max_history_chars`: the conversation's budget
    before it is compacted (default: the model config's `history_chars`); `llm_solvers`: see
    `NegotiatorPrompt`."""

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
        llm_solvers: bool | None = None,
    ) -> None:
        self.worker = worker
        self.config = config
        self.llm = llm
        self.emit = emit
        self.cache = cache
        self.prompt = NegotiatorPrompt(worker, config, condition, llm_solvers)
        self.report_words = report_words
        self.summary_words = summary_words
        self.convo = Conversation(
            config.history_chars if max_history_chars is None else max_history_chars
        )
        self._last_view: RoundView | None = None  # for the end-of-subrun notes
        self._defaulted = ""  # the line opening the next turn after a default answer (F-15)

    def plan(self, view: RoundView) -> Plan:
        return self.prompt.plan(view)

    def system_prompt(self, view: RoundView) -> str:
        return self.prompt.system(view)

    @property
    def _ranges_in_schema(self) -> bool:
        """Numeric/array bounds go into the schema where they help (llama.cpp grammars enforce
        them; prompt-only models read them) but not into OpenAI strict schemas, where support
        for these keywords varies by model and an unsupported one fails the whole request."""
        return self.config.tool_protocol == "json_action" and self.config.structured != (
            "json_schema"
        )

    # --- phases ----------------------------------------------------------------------------------
    async def declare(self, view: RoundView) -> Declaration | Withdraw:
        result: Declaration | Withdraw = await self._ask(ASKS["declaration"], view)
        return result

    async def converse(self, view: RoundView) -> ConversationTurn:
        result: ConversationTurn = await self._ask(ASKS["conversation_turn"], view)
        return result

    async def vote(self, view: RoundView) -> Ballot:
        result: Ballot = await self._ask(ASKS["ballot"], view)
        return result

    def default_declaration(self, view: RoundView) -> Declaration:
        """The protocol's default declaration (as for a failed backend)."""
        result: Declaration = ASKS["declaration"].default(view)
        return result

    def default_ballot(self, view: RoundView) -> Ballot:
        """The protocol's default ballot (as for a failed backend)."""
        result: Ballot = ASKS["ballot"].default(view)
        return result

    async def _ask(self, ask: PhaseAsk, view: RoundView) -> Any:
        """One phase's structured call: the conversation so far plus this turn's message; the
        answer (and any repair exchange) is appended, exactly as sent and received."""
        self._last_view = view
        plan = self.plan(view)
        spec: ActionSpec[Any, Any] = ActionSpec(
            name=ask.name,
            out_model=ask.out_model,
            convert=lambda out: ask.convert(view, plan, self.worker, out),
            default=ask.default(view),
            default_rule=ask.default_rule,
            schema=ask.schema(view, plan, self._ranges_in_schema),
            tools=self.prompt.tools(view),
        )
        messages = self.convo.messages(self.prompt.system(view), view)
        snapshot = self.convo.snapshot
        user = {"role": "user", "content": self._news(self.prompt.turn(view, ask, self.convo))}
        if snapshot:
            self.convo.snapshot = False
        outcome = await ask_action(
            self.llm,
            self.config,
            [*messages, user],
            spec,
            meta=CallMeta(
                self.worker, "negotiator", ask.phase, subrun=view.subrun, round=view.round
            ),
            emit=self.emit,
            cache=self.cache,
            instruct=False,
        )
        self.convo.append([user, *outcome.exchange])
        if outcome.defaulted:
            self._defaulted = prompts.DEFAULTED.format(
                name=ask.name, default=prompts.DEFAULT_ANSWERS[ask.name]
            )
        return outcome.action

    def _news(self, text: str) -> str:
        """`text`, opened by the line saying the protocol answered for this worker last time."""
        line, self._defaulted = self._defaulted, ""
        return f"{line}\n{text}" if line else text

    # --- subrun boundaries -----------------------------------------------------------------------
    async def start_subrun(self, subrun: int, scratch: Scratch | None) -> None:
        """Called by the arena (beyond the protocol): forget the previous subrun's transcript."""
        self._last_view = None
        self._defaulted = ""

    async def end_subrun(self, recap: SubrunRecap, scratch: Scratch | None) -> None:
        """Write an after-action report (reports on) and a condensed history (memory on) into
        scratch; each is asked for only if scratch keeps it (`Scratch.accepts`). Both close this
        subrun's conversation (their prefix is the whole negotiation, already sent)."""
        view, self._last_view = self._last_view, None
        if scratch is None or not (scratch.accepts("report") or scratch.accepts("summary")):
            self.convo.reset(None)
            return
        if view is None or view.subrun != recap.subrun or self.convo.system is None:
            await self._standalone_notes(recap, scratch, view)
            self.convo.reset(None)
            return
        system = {"role": "system", "content": self.convo.system}
        report = summary = None
        if scratch.accepts("report"):
            report_user = {
                "role": "user",
                "content": self._news(self.prompt.report_turn(recap, view, self.report_words)),
            }
            meta_r = CallMeta(self.worker, "report", "report", subrun=recap.subrun)
            report = await self._text([system, *self.convo.history, report_user], meta_r)
            self.convo.append(
                [report_user, {"role": "assistant", "content": report or "(no report)"}]
            )
        if scratch.accepts("summary"):
            summary_user = {
                "role": "user",
                "content": self._news(self.prompt.summary_turn(scratch, self.summary_words)),
            }
            meta_s = CallMeta(self.worker, "summary", "summary", subrun=recap.subrun)
            summary = await self._text([system, *self.convo.history, summary_user], meta_s)
        self.convo.reset(None)
        if report:
            scratch.write("report", recap.subrun, report)
        if summary:
            scratch.write("summary", recap.subrun, summary)

    async def _text(self, messages: list[dict[str, Any]], meta: CallMeta) -> str | None:
        """A plain-text answer, or None when the call failed (recorded in its LlmCall event;
        the arena sees no new scratch entry)."""
        req = ChatRequest(messages=messages)
        try:
            res = await self.llm.call(self.config, req, meta=meta, emit=self.emit, cache=self.cache)
        except LlmUnavailable:
            return None
        text = (res.text or "").strip()
        return text or None

    async def _standalone_notes(
        self, recap: SubrunRecap, scratch: Scratch, view: RoundView | None
    ) -> None:
        """Report and summary for a subrun this worker never negotiated in (no conversation)."""
        (r_sys, r_user), (s_sys, s_user) = self.prompt.standalone(
            recap, scratch, view, self.report_words, self.summary_words
        )
        report = summary = None
        if scratch.accepts("report"):
            meta_r = CallMeta(self.worker, "report", "report", subrun=recap.subrun)
            report = await self._text(
                [{"role": "system", "content": r_sys}, {"role": "user", "content": r_user}], meta_r
            )
        if scratch.accepts("summary"):
            meta_s = CallMeta(self.worker, "summary", "summary", subrun=recap.subrun)
            summary = await self._text(
                [{"role": "system", "content": s_sys}, {"role": "user", "content": s_user}], meta_s
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
    llm_solvers: bool | None = None,
) -> LlmNegotiator:
    """An LLM negotiator for `worker` (see `LlmNegotiator` for the arguments)."""
    return LlmNegotiator(
        worker,
        config=config,
        llm=llm,
        emit=emit,
        cache=cache,
        condition=condition,
        llm_solvers=llm_solvers,
    )

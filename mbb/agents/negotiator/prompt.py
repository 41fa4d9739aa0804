"""What one LLM negotiator reads, built from the condition and its round views.

- The system prompt is static for a worker in a condition: the condition's rules, generated
  through the protocol's registry (`mbb.protocol.explain`: only the phases that run, each rule
  once), which field of each phase's answer is which with its schema, then which worker this
  is (last, so all workers of a condition share the longest possible prefix).
- Each turn shows only what is new since the worker's previous turn (`Conversation`): its
  private situation and the candidates when they changed, finished rounds, new messages, the
  current declarations, then the phase's one-line instruction.
Rendering is deterministic: the same state gives the same bytes, hence the same cache key.
The templates are `mbb.agents.prompts.negotiator`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from mbb.agents.negotiator.asks import ASKS, PhaseAsk
from mbb.agents.negotiator.conversation import Conversation
from mbb.agents.prompts import negotiator as prompts
from mbb.core.agent_api import PastRound, RoundView, SubrunRecap
from mbb.core.board import Post
from mbb.core.scratch import Scratch
from mbb.llm.config import ModelConfig
from mbb.llm.structured import tool_for
from mbb.params import Condition
from mbb.protocol.explain import BALLOT, CLOCK, CONVERSATION, DECLARATION, Plan, explain, plan_of
from mbb.protocol.explain import render as render_rules
from mbb.protocol.history import posts_summary, rounds_summary

__all__ = ["NegotiatorPrompt", "recap_fields", "render_posts", "render_round", "seconds"]

_PHASE_OF = {"declaration": DECLARATION, "conversation_turn": CONVERSATION, "ballot": BALLOT}


def seconds(s: float) -> str:
    return f"{s:.0f} s"


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


def recap_fields(recap: SubrunRecap) -> dict[str, Any]:
    """The subrun's outcome as the report prompts' placeholders (one formatting for both)."""
    return {
        "subrun_no": recap.subrun,
        "task": recap.task_id,
        "outcome": recap.outcome,
        "score": f"{recap.score:.2f}",
        "windows": recap.windows,
        "granted": seconds(recap.granted_s),
        "used": seconds(recap.used_s),
        "waited": seconds(recap.waited_s),
        "spent": recap.spent,
        "budget_left": recap.budget_left,
    }


def render_round(r: PastRound) -> str:
    parts = []
    for pos, w in enumerate(r.order, 1):
        used = f", used {seconds(r.used[w])}" if w in r.used else ""
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


def _render_rounds(rounds: list[PastRound], limit: int = 8, me: str | None = None) -> str:
    """The latest `limit` rounds in full, a summary of the earlier ones of this subrun (their
    outcomes and published reasoning, `mbb.protocol.history`)."""
    if not rounds:
        return "No earlier rounds this subrun."
    shown = rounds[-limit:]
    head = "Earlier rounds this subrun (public):"
    if len(rounds) > limit:
        summary = rounds_summary(rounds[:-limit], me)
        head = summary + "\n" + head + f" (last {limit} of {len(rounds)})"
    return "\n".join([head, *(render_round(r) for r in shown)])


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


def render_posts(posts: Sequence[Post], me: str, subrun: int, limit: int = 40) -> str:
    """This subrun's latest `limit` visible posts in full; the earlier ones summarised with
    their text (`mbb.protocol.history.posts_summary`)."""
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
    return "Your worker's notes from earlier subruns:\n" + scratch.render()


@functools.cache
def _view_condition(window_min: int, window_max: int, max_turns: int, revisable: bool) -> Condition:
    return Condition.model_validate(
        {
            "windows": {"min_s": window_min, "max_s": window_max},
            "negotiation": {
                "max_turns": max_turns,
                "bids": "revisable" if revisable else "fixed",
            },
            "time": {"model": "charged"},  # an LLM worker's clock
        }
    )


class NegotiatorPrompt:
    """The prompts of worker `worker` answering through `config` (its tool protocol decides
    how answers are asked for). `condition`: the condition whose rules are explained; without
    one, the default condition's rules with the view's window bounds, turns and bid revision
    (a negotiator driven by hand-built views)."""

    def __init__(
        self,
        worker: str,
        config: ModelConfig,
        condition: Condition | None,
        llm_solvers: bool | None = None,
    ) -> None:
        """`llm_solvers`: whether the condition's solvers are language models (True: all,
        False: none, None: mixed or not known), for the clock's sentence; the backend registry
        that knows it sits above this module (`mbb.agents.backends.llm_solvers`)."""
        self.worker = worker
        self.config = config
        self.condition = condition
        self.llm_solvers = llm_solvers

    # --- the condition ---------------------------------------------------------------------------
    def condition_for(self, view: RoundView) -> Condition:
        if self.condition is not None:
            return self.condition
        return _view_condition(view.window_min_s, view.window_max_s, view.max_turns, view.revisable)

    def plan(self, view: RoundView) -> Plan:
        return plan_of(self.condition_for(view))

    def clock_text(self, view: RoundView | None = None) -> str:
        """How time works in the condition, as the explanation says it (its time model)."""
        cond = self.condition or _view_condition(30, 300, 3, True)
        if view is not None:
            cond = self.condition_for(view)
        return next(s.text for s in explain(cond, llm_solvers=self.llm_solvers) if s.tag == CLOCK)

    # --- the system prompt -----------------------------------------------------------------------
    def system(self, view: RoundView) -> str:
        """The condition's rules, what each of its phases' answers must contain and how to
        answer, then which worker this is. The same bytes for every call of this worker in a
        condition, and the same for all workers up to the last paragraph."""
        cond = self.condition_for(view)
        plan = plan_of(cond)
        rules = render_rules(explain(cond, list(view.population), llm_solvers=self.llm_solvers))
        identity = prompts.IDENTITY.format(worker=self.worker)
        return rules + self._answers(view, plan) + identity

    @staticmethod
    def fields(name: str, plan: Plan) -> str:
        """Which field of the answer `name` is which (the rules themselves are stated once, in
        the explanation)."""
        if name == "declaration":
            return prompts.FIELDS_DECLARATION.format(
                withdraw=prompts.FIELDS_WITHDRAW if plan.withdrawal else ""
            )
        if name == "conversation_turn":
            return prompts.FIELDS_TURN.format(
                revision=prompts.FIELDS_REVISION_ALLOWED
                if plan.revisable
                else prompts.FIELDS_REVISION_FIXED
            )
        return prompts.FIELDS_BALLOT.format(
            reasoning=prompts.FIELDS_PUBLISHED
            if plan.reasoning_published
            else prompts.FIELDS_SECRET
        )

    def asks(self, plan: Plan) -> list[PhaseAsk]:
        """The answers this condition asks for, in phase order."""
        return [a for a in ASKS.values() if a.runs(plan)]

    def _answers(self, view: RoundView, plan: Plan) -> str:
        schemas = {a.name: a.static_schema(plan) for a in self.asks(plan)}
        if not schemas:
            return ""
        if self.config.tool_protocol == "native":
            text = prompts.ANSWERS_TOOLS + "".join(
                prompts.ANSWER_TOOL_ITEM.format(
                    name=k, phase=_PHASE_OF[k].upper(), fields=self.fields(k, plan)
                )
                for k in schemas
            )
        else:
            text = prompts.ANSWERS_JSON_HEAD + "".join(
                prompts.ANSWER_JSON_ITEM.format(
                    name=k,
                    phase=_PHASE_OF[k].upper(),
                    fields=self.fields(k, plan),
                    schema=json.dumps(v, separators=(",", ":")),
                )
                for k, v in schemas.items()
            )
        text += prompts.INVALID_ANSWER.format(
            defaults="; ".join(prompts.DEFAULT_ANSWERS[k] for k in schemas)
        )
        ends = [prompts.END_REPORT] if plan.reports else []
        if plan.memory:
            ends.append(prompts.END_SUMMARY)
        if ends:
            text += prompts.END_OF_SUBRUN.format(
                what=" and ".join(ends), they="they become" if len(ends) > 1 else "it becomes"
            )
        return text

    def tools(self, view: RoundView) -> list[dict[str, Any]] | None:
        """Native protocol: the same tools on every call (their schemas are part of the prompt
        prefix a server caches); the round's constraints are checked on the answer."""
        if self.config.tool_protocol != "native":
            return None
        plan = self.plan(view)
        return [tool_for(a.name, a.static_schema(plan)) for a in self.asks(plan)]

    # --- a turn ----------------------------------------------------------------------------------
    def _news(self, view: RoundView, convo: Conversation) -> str:
        """What is new since this worker's previous turn (everything, on a fresh start)."""
        parts = []
        mine = [p for p in view.posts if p.subrun == view.subrun]
        if convo.snapshot:  # the notes are in the turn's head
            parts.append(_render_rounds(view.past_rounds, me=self.worker))
            parts.append(render_posts(mine, self.worker, view.subrun))
        else:
            fresh_rounds = view.past_rounds[convo.seen_rounds :]
            if fresh_rounds:
                parts.append(
                    "Rounds finished since your last turn (public):\n"
                    + "\n".join(render_round(r) for r in fresh_rounds)
                )
            fresh_posts = [p for p in mine if p.seq > convo.seen_seq]
            if fresh_posts:
                parts.append(
                    "New messages you can see:\n"
                    + "\n".join(_render_post(p, self.worker) for p in fresh_posts)
                )
        if view.declarations:
            parts.append(convo.changed("declarations", _render_declarations(view)))
        convo.seen_rounds = len(view.past_rounds)
        convo.seen_seq = max((p.seq for p in mine), default=convo.seen_seq)
        return "".join(p + "\n" for p in parts if p)

    def turn(self, view: RoundView, ask: PhaseAsk, convo: Conversation) -> str:
        """The user message of one call: the subrun's opening (or the snapshot's) on a fresh
        conversation, then what changed, then the phase's instruction and how to answer."""
        head = ""
        if not convo.history:
            memory = _render_memory(view.scratch) or "You have no notes from earlier subruns."
            if convo.snapshot:
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
        ).format(name=ask.name)
        situation = prompts.SITUATION.format(
            now=seconds(view.now_s),
            budget=view.budget,
            time_left=seconds(view.time_left_s),
            deadline=seconds(view.deadline_s),
            wanted=view.wanted_s,
        )
        lines = [
            prompts.TURN_HEAD.format(subrun_no=view.subrun, round_no=view.round),
            convo.changed("situation", situation),
            convo.changed(
                "candidates", prompts.CANDIDATES.format(candidates=", ".join(view.candidates))
            ),
            self._news(view, convo).rstrip("\n"),
            ask.instruction(view, self.worker),
            answer,
        ]
        body = "\n".join(x for x in lines if x)
        return head + body

    # --- the end of a subrun ---------------------------------------------------------------------
    def report_turn(self, recap: SubrunRecap, view: RoundView, max_words: int) -> str:
        rounds = "\n".join(render_round(r) for r in recap.rounds) or "(no rounds)"
        return prompts.REPORT_TURN.format(
            **recap_fields(recap),
            subruns_total=view.subruns_total,
            rounds=rounds,
            max_words=max_words,
        )

    def summary_turn(self, scratch: Scratch, max_words: int) -> str:
        previous = "\n".join(e.text for e in scratch.of_kind("summary")[-1:]) or "(none)"
        return prompts.SUMMARY_TURN.format(previous=previous, max_words=max_words)

    def standalone(
        self,
        recap: SubrunRecap,
        scratch: Scratch,
        view: RoundView | None,
        report_words: int,
        summary_words: int,
    ) -> tuple[tuple[str, str], tuple[str, str]]:
        """(system, user) of the report and of the summary for a subrun this worker never
        negotiated in (no conversation to continue)."""
        rounds = "\n".join(render_round(r) for r in recap.rounds) or "(no rounds)"
        transcript = (
            render_posts(view.posts, self.worker, recap.subrun, limit=60)
            if view is not None
            else "(none)"
        )
        subruns_total = view.subruns_total if view is not None else 0
        report = (
            prompts.REPORT_SYSTEM.format(
                worker=self.worker, max_words=report_words, clock=self.clock_text(view)
            ),
            prompts.REPORT_USER.format(
                **recap_fields(recap),
                worker=self.worker,
                subruns_total=subruns_total or "?",
                memory=scratch.render() or "(none)",
                rounds=rounds,
                transcript=transcript,
            ),
        )
        previous = "\n".join(e.text for e in scratch.of_kind("summary")[-1:]) or "(none)"
        summary = (
            prompts.SUMMARY_SYSTEM.format(worker=self.worker, max_words=summary_words),
            prompts.SUMMARY_USER.format(
                previous=previous, subrun_no=recap.subrun, rounds=rounds, transcript=transcript
            ),
        )
        return report, summary

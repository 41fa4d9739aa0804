"""The phases of a round as functions over a round context: declare, converse, vote, publish,
pay and execute; and the end of a subrun.

A round starts when the resource is idle and the queue is not empty. A mechanism
(`mbb.protocol.mechanisms`) runs the phases it needs and returns a `Schedule`; the arena then
publishes it (`publish`), and each window is paid for (`pay`) and executed in order
(`execute`), on the arena's clock; `end_subrun` evaluates and collects the reports. Every
agent call goes through the arena's guarded call, so a failing backend gets its stated default
and the others go on.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field

from mbb.core import events as ev
from mbb.core.actions import (
    Ballot,
    ConversationTurn,
    Declaration,
    Withdraw,
    as_payload,
)
from mbb.core.agent_api import EvaluationResult, PastRound, RoundView, SubrunRecap, WindowGrant
from mbb.protocol.context import FAILED, Round, RunContext, round4
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
    "Schedule",
    "accept_declaration",
    "apply_turn",
    "converse",
    "declare",
    "end_subrun",
    "execute",
    "pay",
    "publish",
    "publish_ballot_reasoning",
    "vote",
]


@dataclass(slots=True, kw_only=True)
class Schedule:
    """What a mechanism decided: the windows in order, their lengths and prices.

    `rule`: the label a `schedule_published` event records; `payment_rule`: the label of each
    `payment` event; `bids`: every scheduled candidate's bid (0 without bids); `bids_public`:
    whether every candidate's bid was public (negotiated declarations are posted; a sealed bid
    is seen only as a holder's, in the published schedule); `requeue`: candidates left out this
    round, who keep their place ahead of later requests."""

    rule: str
    order: list[str]
    allocations: dict[str, int]
    bids: dict[str, int]
    prices: dict[str, int]
    payment_rule: str
    bids_public: bool = False
    unanimous: bool = False
    rankings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    requeue: list[str] = field(default_factory=list)


def accept_declaration(
    arena: RunContext, w: str, action: Declaration | Withdraw | BaseException, n_candidates: int
) -> Declaration | None:
    """Apply the stated rules to one declaration: a backend failure (or a withdrawal where
    withdrawal is forbidden) gets the default declaration, an allowed withdrawal takes the
    worker out, anything else is repaired (each issue recorded). None after a withdrawal."""
    c = arena.condition
    if isinstance(action, BaseException):
        arena.backend_failure(w, "declaration", action, DEFAULT_DECLARATION)
        action = default_declaration(arena.workers[w].wanted_s, n_candidates)
    if isinstance(action, Withdraw):
        if c.negotiation.withdrawal == "allowed":
            arena.workers[w].status = "withdrawn"
            arena.emit(ev.Withdrawn, w, reason=action.reason)
            return None
        arena.record_issues(
            w,
            "declaration",
            [Issue("action", "withdraw", DEFAULT_DECLARATION, "withdrawal is not allowed")],
        )
        action = default_declaration(arena.workers[w].wanted_s, n_candidates)
    d, issues = repair_declaration(
        action,
        budget=arena.ledger.balances[w],
        min_s=c.windows.min_s,
        max_s=c.windows.max_s,
        n_candidates=n_candidates,
        note_max=c.negotiation.note_max_chars,
    )
    arena.record_issues(w, "declaration", issues)
    return d


def _record_declaration(
    arena: RunContext, rnd: Round, w: str, d: Declaration, *, post: bool, turn: int | None = None
) -> None:
    """Record an accepted declaration (`turn` given: a revision made in that conversation turn)
    and, with `post`, put its note on the public board."""
    revision = {} if turn is None else {"revision": True, "turn": turn}
    arena.emit(
        ev.Declared,
        w,
        bid=d.bid,
        duration=d.duration,
        position=d.position,
        note=d.note,
        labels=list(d.labels),
        intents=as_payload(d.intents),
        **revision,
    )
    if post:
        arena.board.post(
            w,
            d.note,
            to=None,
            subrun=rnd.subrun,
            round=rnd.number,
            turn=turn or 0,
            kind="note",
            payload=as_payload(d.intents),
        )


async def declare(arena: RunContext, rnd: Round, *, public: bool) -> dict[str, Declaration]:
    """Phase 1: every candidate declares at once; repaired declarations are recorded, and
    with `public` their notes are posted (a sealed-bid mechanism keeps them off the board).
    Withdrawn candidates leave `rnd.candidates`."""
    candidates = rnd.candidates
    views = {w: arena.round_view(w, rnd, 0, {}) for w in candidates}
    workers = arena.workers
    results = await arena.phase(candidates, lambda w: workers[w].negotiator.declare(views[w]))
    decls = rnd.declarations
    for w, action in results.items():
        d = accept_declaration(arena, w, action, len(candidates))
        if d is None:
            continue
        decls[w] = d
        _record_declaration(arena, rnd, w, d, post=public and bool(d.note or d.intents))
    rnd.candidates = [w for w in candidates if w in decls]
    return decls


async def converse(arena: RunContext, rnd: Round) -> None:
    """Phase 2: up to `max_turns` simultaneous turns (posts land in queue order); it ends early
    after a turn in which nobody spoke."""
    workers = arena.workers
    for turn in range(1, arena.condition.negotiation.max_turns + 1):
        views = {w: arena.round_view(w, rnd, turn, dict(rnd.declarations)) for w in rnd.candidates}

        def turn_of(w: str, views: dict[str, RoundView] = views) -> Awaitable[ConversationTurn]:
            return workers[w].negotiator.converse(views[w])

        results = await arena.phase(rnd.candidates, turn_of)
        spoke = False
        for w, turn_action in results.items():
            if isinstance(turn_action, BaseException):
                arena.backend_failure(w, "conversation", turn_action, DEFAULT_TURN)
                continue
            spoke |= apply_turn(arena, rnd, w, turn_action, turn)
        if not spoke:
            break


def apply_turn(
    arena: RunContext, rnd: Round, w: str, turn_action: ConversationTurn, turn: int
) -> bool:
    """Post one candidate's messages and apply its revision (each repaired and recorded);
    True if it said or revised anything."""
    c = arena.condition
    spoke = False
    for m in turn_action.messages:
        fixed, issues = repair_message(
            m, sender=w, population=arena.present, max_chars=c.negotiation.message_max_chars
        )
        arena.record_issues(w, "conversation", issues)
        if fixed is None:
            continue
        spoke = True
        arena.emit(
            ev.MessagePosted,
            w,
            to=fixed.to,
            text=fixed.text,
            turn=turn,
            labels=list(fixed.labels),
            intents=as_payload(fixed.intents),
        )
        arena.board.post(
            w,
            fixed.text,
            to=fixed.to,
            subrun=rnd.subrun,
            round=rnd.number,
            turn=turn,
            payload=as_payload(fixed.intents),
        )
    r = turn_action.revision
    if r is None:
        return spoke
    if c.negotiation.bids == "fixed":
        arena.record_issues(
            w,
            "conversation",
            [Issue("revision", r.bid, "drop", "bids are fixed in this condition")],
        )
        return spoke
    r, issues = repair_declaration(
        r,
        budget=arena.ledger.balances[w],
        min_s=c.windows.min_s,
        max_s=c.windows.max_s,
        n_candidates=len(rnd.candidates),
        note_max=c.negotiation.note_max_chars,
    )
    arena.record_issues(w, "revision", issues)
    rnd.declarations[w] = r
    _record_declaration(arena, rnd, w, r, post=True, turn=turn)
    return True


async def vote(arena: RunContext, rnd: Round, tiebreak: list[str]) -> dict[str, Ballot]:
    """Phase 3: simultaneous ballots, secret until the schedule is published; a missing one is
    the default ballot, every one is repaired to a full ranking (issues recorded)."""
    c = arena.condition
    candidates, decls, workers = rnd.candidates, rnd.declarations, arena.workers
    declared = {w: decls[w].duration for w in candidates}
    views = {w: arena.round_view(w, rnd, 0, dict(decls)) for w in candidates}
    results = await arena.phase(candidates, lambda w: workers[w].negotiator.vote(views[w]))
    ballots = rnd.ballots
    for w, b in results.items():
        defaulted = False
        if isinstance(b, BaseException):
            arena.backend_failure(w, "ballot", b, DEFAULT_BALLOT)
            b, defaulted = default_ballot(tiebreak, declared), True
        b, issues = repair_ballot(
            b,
            tiebreak=tiebreak,
            declared=declared,
            reasoning_max=c.negotiation.reasoning_max_chars,
        )
        arena.record_issues(w, "ballot", issues)
        ballots[w] = b
        arena.emit(
            ev.BallotCast,
            w,
            ranking=list(b.ranking),
            allocations=[b.allocations[x] for x in b.ranking],
            reasoning=b.reasoning,
            labels=list(b.labels),
            intents=as_payload(b.intents),
            defaulted=defaulted or b.defaulted,
        )
    return ballots


def publish(arena: RunContext, rnd: Round, schedule: Schedule) -> PastRound:
    """Phase 4's end: the schedule is published (event, and the round's public record that
    later views show); candidates left out keep their place in the queue. The record keeps
    only what is public: every candidate's bid where declarations were posted, else only the
    holders' (a sealed auction's losing bids are seen by no one)."""
    order, alloc, bids = schedule.order, schedule.allocations, schedule.bids
    arena.emit(
        ev.SchedulePublished,
        rule=schedule.rule,
        order=order,
        allocations=[alloc[x] for x in order],
        bids=[bids[x] for x in order],
        ballots_unanimous=schedule.unanimous,
    )
    public = dict(bids) if schedule.bids_public else {w: bids[w] for w in order}
    record = PastRound(rnd.number, list(order), public, dict(alloc), ballots=schedule.rankings)
    rnd.past.append(record)
    rnd.queue.extend(schedule.requeue)
    return record


def publish_ballot_reasoning(arena: RunContext, rnd: Round, record: PastRound) -> None:
    """After the round (its windows run): every ballot's reasoning becomes public, in the
    round's record (so later views show it) and as a `ballots_published` event."""
    if not rnd.ballots:
        return
    record.reasoning = {w: b.reasoning for w, b in rnd.ballots.items()}
    arena.emit(ev.BallotsPublished, workers=list(rnd.ballots))


# --- pay, execute, end of subrun ---------------------------------------------------------------


def pay(arena: RunContext, holder: str, price: int, rule: str) -> None:
    """Charge a window's price at its start (nothing is recorded for a free window)."""
    if price <= 0:
        return
    w = arena.workers[holder]
    balance = arena.ledger.pay(holder, price)
    w.spent += price
    arena.emit(ev.Payment, holder, amount=price, balance=balance, rule=rule)


async def execute(
    arena: RunContext, rnd: Round, schedule: Schedule, record: PastRound, pos: int
) -> None:
    """Pay for and run the window at `pos` (1-based) of the published schedule: its holder
    runs until the allocation ends, its deadline passes, or it finishes or releases. The clock
    is the arena's (`Arena.advance_to` terminates the waiting workers whose deadline passes)."""
    holder = schedule.order[pos - 1]
    allocation = schedule.allocations[holder]
    price = schedule.prices[holder]
    w = arena.workers[holder]
    if not w.active:
        reason = w.status if w.status in ("terminated", "withdrawn", "completed") else "withdrawn"
        arena.emit(ev.WindowDropped, holder, position=pos, allocation=allocation, reason=reason)
        return
    if allocation <= 0:
        arena.emit(
            ev.WindowDropped,
            holder,
            position=pos,
            allocation=allocation,
            reason="zero_allocation",
        )
        await arena.poll(holder, rnd.queue)
        return
    if arena.t >= w.deadline_s:  # defensive: advance_to terminates before this
        arena.terminate(holder)
        arena.emit(
            ev.WindowDropped, holder, position=pos, allocation=allocation, reason="terminated"
        )
        return
    start = arena.t
    if w.requested_at is not None:
        w.waited_s += start - w.requested_at
    pay(arena, holder, price, schedule.payment_rule)
    arena.emit(ev.WindowStarted, holder, position=pos, allocation=allocation, price=price)
    hard_end = min(start + allocation, w.deadline_s)
    grant = WindowGrant(holder, rnd.subrun, rnd.number, start, allocation, hard_end)
    used = 0.0

    def failed_window(exc: BaseException) -> str:
        # commands that ran before the failure stay charged (the resource's clock)
        nonlocal used
        if arena.resource is not None:
            used = min(max(0.0, arena.resource.used_s(holder)), hard_end - start)
        if used > 0:
            return f"window ended by the failure after {used:g} s of commands"
        return "window forfeited at its start"

    try:
        outcome = await arena.guarded(
            holder, "execution", failed_window, w.solver.run_window(grant)
        )
    finally:
        if arena.resource is not None:
            arena.resource.close_window(holder)  # no-op unless the solver left it open
    if outcome is FAILED:
        completed, released = False, True
    else:
        used = min(max(0.0, outcome.used_s), hard_end - start)
        completed, released = outcome.completed, outcome.released
    # a window run to its hard end ends exactly there (no float drift past the deadline)
    end = hard_end if used >= hard_end - start else start + used
    arena.advance_to(end, holder)
    w.windows += 1
    w.granted_s += allocation
    w.used_s += used
    record.used[holder] = used
    progress = round4(w.solver.progress)
    # reaching the deadline terminates the holder, also when its allocation ends exactly there
    if completed:
        why = "completed"
    elif end >= w.deadline_s:
        why = "deadline"
    elif released:
        why = "released"
    else:
        why = "allocation"
    # `used` unrounded: start + used must reproduce the clock (the next window's start)
    arena.emit(
        ev.WindowEnded,
        holder,
        position=pos,
        start=start,
        used=used,
        allocation=allocation,
        reason=why,
        progress=progress,
    )
    if completed:
        w.status = "completed"
        arena.emit(ev.Completed, holder, work_s=w.work_s)
    elif why == "deadline":
        arena.terminate(holder)
    else:
        await arena.poll(holder, rnd.queue)


async def end_subrun(
    arena: RunContext, subrun: int, rounds: int, reason: str, past: list[PastRound]
) -> None:
    """The end of a subrun: evaluate every present worker, then ask its agents for their
    end-of-subrun reports (they write to scratch, which the memory and report switches gate)."""
    arena.emit(ev.SubrunEnded, rounds=rounds, reason=reason)
    for w in map(arena.workers.__getitem__, arena.present):
        res = await arena.guarded(w.id, "evaluation", "score 0", w.solver.evaluate())
        if res is FAILED:
            res = EvaluationResult(score=0.0, passed=0, total=0, progress=0.0)
        outcome = "unfinished" if w.status == "active" else w.status
        arena.emit(
            ev.Evaluated,
            w.id,
            task=w.task,
            score=round4(res.score),
            passed=res.passed,
            total=res.total,
            resolved=res.resolved,
            almost_resolved=res.almost_resolved,
            progress=round4(res.progress),
            outcome=outcome,
        )
        recap = SubrunRecap(
            worker=w.id,
            subrun=subrun,
            task_id=w.task,
            outcome=outcome,
            score=res.score,
            budget_left=arena.ledger.balances[w.id],
            spent=w.spent,
            windows=w.windows,
            granted_s=w.granted_s,
            used_s=w.used_s,
            waited_s=w.waited_s,
            rounds=past,
        )
        memory = arena.memory_of(w)
        solver_report = getattr(w.solver, "end_subrun", None)  # optional (LLM solvers)
        if solver_report is not None:
            await arena.guarded(w.id, "report", "no solver report", solver_report(recap, memory))
        await arena.guarded(
            w.id, "report", "no after-action report", w.negotiator.end_subrun(recap, memory)
        )
    arena.ledger.audit()

"""Mechanisms: what decides a round's schedule. Each returns a `Schedule` (or None when no
candidate is left); the arena then publishes it, charges each window's price at its start and
runs it, on ONE path for every mechanism.

- `NegotiatedMechanism`: the protocol's phases 1-4 (declarations, conversation, ballots,
  aggregation) with the condition's aggregation, allocation and payment rules from the registry.
- `CentralizedMechanism`: an operator's scheduler (`mbb.protocol.scheduling.centralized`) on
  the queued requests; the bid mechanisms first ask for sealed declarations (phase 1 only,
  nothing posted).

`mechanism_for(kind)` builds the one a condition names (`mbb.protocol.rules.MECHANISMS`).
"""

from __future__ import annotations

from typing import Protocol

from mbb.protocol import phases
from mbb.protocol.context import Round, RunContext
from mbb.protocol.phases import Schedule
from mbb.protocol.rules import AGGREGATION, ALLOCATION, MECHANISMS, PAYMENT
from mbb.protocol.scheduling.aggregation import tie_break_order
from mbb.protocol.scheduling.centralized import Centralized, Job

__all__ = ["CentralizedMechanism", "Mechanism", "NegotiatedMechanism", "mechanism_for"]


class Mechanism(Protocol):
    """Decides one round's schedule from the round's candidates."""

    async def schedule(self, arena: RunContext, rnd: Round) -> Schedule | None: ...


class NegotiatedMechanism:
    """The agents decide: declarations, conversation (when it runs), ballots, then the
    condition's aggregation and allocation rules; prices by its payment rule."""

    async def schedule(self, arena: RunContext, rnd: Round) -> Schedule | None:
        c = arena.condition
        mech = c.mechanism
        await phases.declare(arena, rnd, public=True)
        candidates = rnd.candidates
        if not candidates:
            return None
        if arena.plan.conversation and len(candidates) > 1:
            await phases.converse(arena, rnd)
        decls = rnd.declarations
        bids = {w: decls[w].bid for w in candidates}
        tiebreak = tie_break_order(candidates, bids)
        ballots = await phases.vote(arena, rnd, tiebreak)
        rankings = [ballots[w].ranking for w in candidates]
        order, label = AGGREGATION[mech.aggregation].implementation(
            tiebreak, rankings, mech.kemeny_exact_max
        )
        declared = {w: decls[w].duration for w in candidates}
        alloc = ALLOCATION[mech.allocation].implementation(
            order, declared, [ballots[w].allocations for w in candidates]
        )
        return Schedule(
            rule=label,
            order=order,
            allocations=alloc,
            bids=bids,
            prices=PAYMENT[mech.payment].implementation(order, bids),
            payment_rule=mech.payment,
            bids_public=True,  # declarations are posted to everyone
            unanimous=len({tuple(r) for r in rankings}) == 1,
            rankings={w: ballots[w].ranking for w in candidates},
        )


class CentralizedMechanism:
    """The operator's scheduler replaces phases 1-4. `bids`: ask for sealed declarations first
    (their bids and durations are the jobs'); otherwise the requested durations are."""

    def __init__(self, entry: Centralized) -> None:
        self.kind = entry.name
        self.scheduler = entry.schedule
        self.bids = entry.asks_bids

    async def schedule(self, arena: RunContext, rnd: Round) -> Schedule | None:
        c = arena.condition
        workers = arena.workers
        candidates = rnd.candidates
        bids: dict[str, int] = dict.fromkeys(candidates, 0)
        durations = {w: workers[w].wanted_s for w in candidates}
        if self.bids:
            decls = await phases.declare(arena, rnd, public=False)
            candidates = rnd.candidates
            bids = {w: decls[w].bid for w in candidates}
            durations = {w: decls[w].duration for w in candidates}
        if not candidates:
            return None
        jobs = [
            Job(
                id=w,
                requested_at=workers[w].requested_at or 0.0,
                duration=durations[w],
                deadline=workers[w].spec.deadline_s,
                bid=bids[w],
            )
            for w in candidates
        ]
        slots = self.scheduler(jobs, c.mechanism.quantum_s, c.windows.min_s)
        alloc = {s.id: s.allocation for s in slots}
        return Schedule(
            rule=self.kind,
            order=[s.id for s in slots],
            allocations=alloc,
            bids=bids,
            prices={s.id: s.price for s in slots},
            payment_rule=self.kind,
            # auction losers keep their place: they re-enter the queue in request order, ahead
            # of anyone who requests during this round's window
            requeue=[w for w in candidates if w not in alloc],
        )


def mechanism_for(kind: str) -> Mechanism:
    """The running mechanism of a registered `mechanism.kind`."""
    entry = MECHANISMS[kind].implementation
    return NegotiatedMechanism() if entry is None else CentralizedMechanism(entry)

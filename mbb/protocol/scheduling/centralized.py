"""Centralized schedulers: baselines that replace negotiation on the same demand.

When `mechanism.kind` is not `negotiated`, a round skips conversation and ballots; the operator
orders the queued candidates itself. These are pure functions of the queued jobs: the round
around them (sealed bids, publishing, payment, execution) is `mbb.protocol.mechanisms`, so
demand, solvers, clock, ledger and event log are the arena's own and every table and figure
works unchanged.

| kind               | order                                   | window            | payment   |
|--------------------|-----------------------------------------|-------------------|-----------|
| fcfs               | request time, then queue position       | requested         | none      |
| edf                | true private deadline (an oracle)       | requested         | none      |
| sjf                | requested duration                      | requested         | none      |
| round_robin        | queue order                             | min(quantum, req) | none      |
| first_price        | sealed bids: one window, highest bid    | declared          | own bid   |
| second_price       | sealed bids: one window, highest bid    | declared          | 2nd bid   |
| proportional_share | bid, then queue                         | bid share (below) | own bid   |

To add a mechanism: write its scheduler here and register it in `CENTRALIZED_MECHANISMS` with
its texts; it becomes a valid `mechanism.kind`, the arena runs it and agents are told about it.

Every order breaks remaining ties by request time, then queue position. The schedulers are
non-preemptive within a round (a round is a batch of the queue, as in the protocol); a job that
arrives while a round runs waits for the next round, so "EDF" and "SJF" are their batch forms.

Auctions sell ONE window per round (the next one), so the second-price rule is exactly Vickrey's
auction and truthful bidding is a dominant strategy for that window; losers stay queued in
request order. Bids come from the negotiators' declarations (phase 1 only, sealed: nothing is
posted to the board before the schedule).

Proportional share (Kelly's mechanism, deterministic): a round has a time budget of
`quantum_s` seconds per candidate. Each candidate first gets `windows.min_s`; the rest of the
budget is split in proportion to the bids (equal shares if every bid is 0). A share is capped at
the declared duration; each holder pays its bid (a terminated holder pays nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mbb.core.registry import Registry

__all__ = [
    "AUCTIONS",
    "CENTRALIZED",
    "CENTRALIZED_MECHANISMS",
    "Centralized",
    "Job",
    "Scheduler",
    "Slot",
    "edf",
    "fcfs",
    "first_price",
    "proportional_share",
    "round_robin",
    "schedule",
    "second_price",
    "sjf",
    "vickrey",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """One queued request as the operator sees it (deadline: the true private one)."""

    id: str
    requested_at: float
    duration: int  # requested (or, for bid mechanisms, declared) seconds
    deadline: float = float("inf")
    bid: int = 0

    def __post_init__(self) -> None:
        if self.duration < 0:
            raise ValueError(f"job {self.id}: negative duration {self.duration}")
        if self.bid < 0:
            raise ValueError(f"job {self.id}: negative bid {self.bid}")


@dataclass(frozen=True, slots=True)
class Slot:
    """A published window: holder, seconds allocated, and the price charged at its start."""

    id: str
    allocation: int
    price: int = 0


def _ordered(jobs: Sequence[Job], key: Callable[[Job], tuple[Any, ...]]) -> list[Job]:
    """By `key`, then request time, then queue position (the sort is stable)."""
    return sorted(jobs, key=lambda j: (*key(j), j.requested_at))


def fcfs(jobs: Sequence[Job]) -> list[Slot]:
    """First come, first served: request time, then queue position; full requested windows."""
    return [Slot(j.id, j.duration) for j in _ordered(jobs, lambda j: ())]


def edf(jobs: Sequence[Job]) -> list[Slot]:
    """Earliest deadline first (Jackson's rule): minimises maximum lateness on one machine."""
    return [Slot(j.id, j.duration) for j in _ordered(jobs, lambda j: (j.deadline,))]


def sjf(jobs: Sequence[Job]) -> list[Slot]:
    """Shortest job first (SPT): minimises mean completion time when all jobs are present."""
    return [Slot(j.id, j.duration) for j in _ordered(jobs, lambda j: (j.duration,))]


def round_robin(jobs: Sequence[Job], quantum: int) -> list[Slot]:
    """Queue order, one quantum each; an unfinished holder re-queues behind the others."""
    if quantum <= 0:
        raise ValueError(f"round_robin: quantum must be positive, got {quantum}")
    return [Slot(j.id, min(quantum, j.duration)) for j in _ordered(jobs, lambda j: ())]


def vickrey(bids: Sequence[int]) -> tuple[int, int]:
    """(winner index, price) of a sealed-bid second-price auction; ties go to the earlier index."""
    if not bids:
        raise ValueError("vickrey: no bids")
    winner = max(range(len(bids)), key=lambda i: (bids[i], -i))
    rest = [b for i, b in enumerate(bids) if i != winner]
    return winner, max(rest, default=0)


def _auction(jobs: Sequence[Job], second: bool) -> list[Slot]:
    if not jobs:
        return []
    ranked = _ordered(jobs, lambda j: ())  # request order breaks bid ties
    w, price = vickrey([j.bid for j in ranked])
    win = ranked[w]
    return [Slot(win.id, win.duration, price if second else win.bid)]


def first_price(jobs: Sequence[Job]) -> list[Slot]:
    """Sealed-bid first price for the next window: highest bid wins and pays its bid."""
    return _auction(jobs, second=False)


def second_price(jobs: Sequence[Job]) -> list[Slot]:
    """Sealed-bid second price (Vickrey) for the next window: pays the highest losing bid."""
    return _auction(jobs, second=True)


def proportional_share(jobs: Sequence[Job], quantum: int, min_s: int) -> list[Slot]:
    """Bid-proportional shares of a `quantum * n` second budget after a `min_s` floor each."""
    if not jobs:
        return []
    order = _ordered(jobs, lambda j: (-j.bid,))
    n = len(order)
    spare = max(0, quantum * n - min_s * n)
    total = sum(j.bid for j in order)
    out = []
    for j in order:
        share = j.bid / total if total else 1.0 / n
        alloc = min(j.duration, min_s + int(spare * share))
        out.append(Slot(j.id, alloc, j.bid))
    return out


Scheduler = Callable[[Sequence[Job], int, int], list[Slot]]
"""(queued jobs, quantum_s, windows.min_s) -> the published windows, in order."""


@dataclass(frozen=True, slots=True)
class Centralized:
    """One centralized mechanism, everything about it in one entry: its name (a
    `mechanism.kind`), a summary for people, what agents are told (`explains`, a `str.format`
    template over `quantum_s` and `min_s`; `payment_explains`: the payment sentence, '' when
    nothing is charged), whether it asks the negotiators for sealed bids, its scheduler, and
    the taxonomy categories its order enacts (`imposes`: a worker voicing them follows the
    mechanism). `mbb.protocol.rules.MECHANISMS` lists these after the negotiated mechanism."""

    name: str
    summary: str
    explains: str
    payment_explains: str
    schedule: Scheduler
    asks_bids: bool = False
    imposes: frozenset[str] = frozenset()


_OPERATOR = "The operator schedules the candidates itself; you take no part in it. "
_AUCTION = (
    "Each round sells ONE window, the next one, by sealed bid: every candidate declares a bid "
    "and a duration that no one else sees before the window is awarded; the highest bid wins a "
    "window of its declared duration (equal bids: the earlier request), and the published "
    "schedule shows the winner's bid. The others stay queued for the next round, ahead of later "
    "requests."
)

CENTRALIZED_MECHANISMS: Registry[Centralized] = Registry(
    "centralized mechanism",
    [
        Centralized(
            "fcfs",
            "first come, first served, full requested windows",
            _OPERATOR + "Windows go in the order workers asked for them (first come, first "
            "served), each as long as its solver requested.",
            "",
            lambda jobs, quantum, min_s: fcfs(jobs),
            imposes=frozenset({"recency_first"}),
        ),
        Centralized(
            "edf",
            "earliest true private deadline first, full requested windows",
            _OPERATOR + "Windows go in order of the workers' private deadlines, earliest first "
            "(the operator knows every deadline), each as long as its solver requested.",
            "",
            lambda jobs, quantum, min_s: edf(jobs),
            imposes=frozenset({"earliest_deadline_first"}),
        ),
        Centralized(
            "sjf",
            "shortest requested duration first",
            _OPERATOR + "Windows go in order of requested duration, shortest first, each as "
            "long as its solver requested.",
            "",
            lambda jobs, quantum, min_s: sjf(jobs),
            imposes=frozenset({"shortest_job_first"}),
        ),
        Centralized(
            "round_robin",
            "queue order, one quantum_s slice each",
            _OPERATOR + "Windows go in queue order, each at most {quantum_s} seconds; a worker "
            "that has not finished queues again behind the others.",
            "",
            lambda jobs, quantum, min_s: round_robin(jobs, quantum),
            imposes=frozenset({"recency_first"}),
        ),
        Centralized(
            "first_price",
            "sealed-bid first price: one window per round, the winner pays its bid",
            _AUCTION,
            "The winner pays its own bid when its window begins.",
            lambda jobs, quantum, min_s: first_price(jobs),
            asks_bids=True,
            imposes=frozenset({"price_primary"}),
        ),
        Centralized(
            "second_price",
            "sealed-bid second price (Vickrey): one window per round, pays the highest losing bid",
            _AUCTION,
            "The winner pays the highest losing bid (0 if no one else bid) when its window begins.",
            lambda jobs, quantum, min_s: second_price(jobs),
            asks_bids=True,
            imposes=frozenset({"price_primary"}),
        ),
        Centralized(
            "proportional_share",
            "bid-proportional shares of a quantum_s-per-candidate round budget; each pays its bid",
            "Each round every candidate declares a sealed bid and a duration that no one else "
            "sees before the schedule is published; the published schedule shows each holder's "
            "bid. The round has {quantum_s} seconds per candidate: each candidate first gets "
            "{min_s} s and the rest is shared in proportion to the bids (equally if every bid "
            "is 0), capped at the declared duration; windows run in bid order.",
            "Each holder pays its own bid when its window begins.",
            proportional_share,
            asks_bids=True,
            imposes=frozenset({"price_primary"}),
        ),
    ],
)
CENTRALIZED = CENTRALIZED_MECHANISMS.names()
AUCTIONS = ("first_price", "second_price")


def schedule(kind: str, jobs: Sequence[Job], *, quantum: int = 60, min_s: int = 30) -> list[Slot]:
    """Dispatch to the named scheduler (the replay uses this one entry point)."""
    return CENTRALIZED_MECHANISMS[kind].schedule(jobs, quantum, min_s)

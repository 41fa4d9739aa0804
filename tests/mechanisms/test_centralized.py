"""Textbook properties of the pure schedulers, against brute force on small random instances."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mbb.protocol.scheduling.centralized import (
    CENTRALIZED,
    Job,
    edf,
    fcfs,
    first_price,
    proportional_share,
    round_robin,
    schedule,
    second_price,
    sjf,
    vickrey,
)


def _jobs(durations, deadlines=None, released=None, bids=None) -> list[Job]:
    n = len(durations)
    return [
        Job(
            id=f"J{i}",
            requested_at=released[i] if released else 0.0,
            duration=durations[i],
            deadline=deadlines[i] if deadlines else float("inf"),
            bid=bids[i] if bids else 0,
        )
        for i in range(n)
    ]


def _completions(order: list[Job]) -> dict[str, float]:
    t, out = 0.0, {}
    for j in order:
        t += j.duration
        out[j.id] = t
    return out


def _max_lateness(order: list[Job]) -> float:
    c = _completions(order)
    return max(c[j.id] - j.deadline for j in order)


small = st.integers(min_value=1, max_value=6)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_edf_minimises_maximum_lateness(data):
    n = data.draw(small)
    durations = data.draw(st.lists(st.integers(1, 60), min_size=n, max_size=n))
    deadlines = data.draw(st.lists(st.integers(0, 250), min_size=n, max_size=n))
    jobs = _jobs(durations, [float(d) for d in deadlines])
    by_id = {j.id: j for j in jobs}
    got = _max_lateness([by_id[s.id] for s in edf(jobs)])
    best = min(_max_lateness(list(p)) for p in itertools.permutations(jobs))
    assert got == pytest.approx(best)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 60), min_size=1, max_size=6))
def test_sjf_minimises_mean_completion_time(durations):
    jobs = _jobs(durations)
    by_id = {j.id: j for j in jobs}
    got = sum(_completions([by_id[s.id] for s in sjf(jobs)]).values())
    best = min(sum(_completions(list(p)).values()) for p in itertools.permutations(jobs))
    assert got == pytest.approx(best)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(1, 300)), min_size=1, max_size=8),
    st.randoms(use_true_random=False),
)
def test_fcfs_serves_in_request_order(reqs, rnd):
    jobs = _jobs([d for _, d in reqs], released=[float(t) for t, _ in reqs])
    queue = list(jobs)
    rnd.shuffle(queue)
    slots = fcfs(queue)
    times = [next(j.requested_at for j in jobs if j.id == s.id) for s in slots]
    assert times == sorted(times)
    assert [s.allocation for s in slots] == [
        next(j.duration for j in jobs if j.id == s.id) for s in slots
    ]
    # equal request times keep queue order
    pos = {j.id: i for i, j in enumerate(queue)}
    for a, b in itertools.pairwise(slots):
        ta = next(j.requested_at for j in jobs if j.id == a.id)
        tb = next(j.requested_at for j in jobs if j.id == b.id)
        if ta == tb:
            assert pos[a.id] < pos[b.id]


def _utility(value: int, my_bid: int, others: list[int], me: int) -> int:
    bids = list(others)
    bids.insert(me, my_bid)
    winner, price = vickrey(bids)
    return value - price if winner == me else 0


@settings(max_examples=400, deadline=None)
@given(
    value=st.integers(0, 200),
    others=st.lists(st.integers(0, 200), min_size=1, max_size=5),
    deviation=st.integers(0, 400),
    me=st.integers(0, 5),
)
def test_second_price_truthful_bidding_is_never_worse(value, others, deviation, me):
    me = min(me, len(others))
    assert _utility(value, value, others, me) >= _utility(value, deviation, others, me)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 200), min_size=1, max_size=6))
def test_auctions_sell_one_window_to_the_highest_bid(bids):
    jobs = _jobs([60] * len(bids), bids=bids)
    fp, sp = first_price(jobs), second_price(jobs)
    assert len(fp) == len(sp) == 1 and fp[0].id == sp[0].id
    top = max(bids)
    assert fp[0].price == top
    rest = sorted(bids)[:-1]
    assert sp[0].price == (rest[-1] if rest else 0) <= fp[0].price
    assert fp[0].id == f"J{bids.index(top)}"  # ties: the earlier request/queue position


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 100), st.integers(30, 300)), min_size=1, max_size=8),
    st.integers(30, 120),
)
def test_proportional_share_floor_budget_and_caps(reqs, quantum):
    jobs = _jobs([d for _, d in reqs], bids=[b for b, _ in reqs])
    slots = proportional_share(jobs, quantum, 30)
    assert sorted(s.id for s in slots) == sorted(j.id for j in jobs)
    assert sum(s.allocation for s in slots) <= max(quantum, 30) * len(jobs)
    for s in slots:
        j = next(x for x in jobs if x.id == s.id)
        assert min(30, j.duration) <= s.allocation <= j.duration
        assert s.price == j.bid
    assert [s.price for s in slots] == sorted((s.price for s in slots), reverse=True)


def test_proportional_share_equal_shares_without_bids():
    slots = proportional_share(_jobs([300, 300, 300]), 60, 30)
    assert [s.allocation for s in slots] == [60, 60, 60]


def test_round_robin_gives_one_quantum_in_queue_order():
    slots = round_robin(_jobs([300, 20, 90]), 60)
    assert [(s.id, s.allocation) for s in slots] == [("J0", 60), ("J1", 20), ("J2", 60)]
    with pytest.raises(ValueError, match="quantum must be positive"):
        round_robin(_jobs([10]), 0)


def test_schedule_dispatch_and_errors():
    jobs = _jobs([50, 10], deadlines=[100.0, 20.0], bids=[5, 9])
    for kind in CENTRALIZED:
        assert schedule(kind, jobs)
    assert [s.id for s in schedule("edf", jobs)] == ["J1", "J0"]
    with pytest.raises(ValueError, match="unknown centralized mechanism 'lottery'; valid: fcfs"):
        schedule("lottery", jobs)
    with pytest.raises(ValueError, match="negative duration"):
        Job(id="x", requested_at=0.0, duration=-1)
    with pytest.raises(ValueError, match="no bids"):
        vickrey([])

"""Property tests: protocol invariants over thousands of small random conditions.

Each example is a small condition (1-6 workers, 1-3 subruns, short deadlines) so a run takes a
few milliseconds; the invariants themselves are in `helpers.check_invariants`.
"""

from __future__ import annotations

from typing import Any

from helpers import check_invariants, condition, run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mbb.params import PERSONAS

FAST = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def conditions(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 6))
    min_s = draw(st.integers(5, 120))
    max_s = draw(st.integers(min_s, 360))
    overrides = {}
    for i in draw(st.sets(st.integers(1, n), max_size=n)):
        o: dict[str, Any] = {}
        if draw(st.booleans()):
            o["budget"] = draw(st.sampled_from([0, 1, 7, 50, 400, 3000]))
        if draw(st.booleans()):
            o["deadline_min"] = draw(st.sampled_from([0.5, 1, 2.5, 4, 6, 12]))
        if draw(st.booleans()):
            o["persona"] = draw(st.sampled_from(PERSONAS))
        overrides[f"W{i}"] = o
    return {
        "name": "prop",
        "subruns": draw(st.integers(1, 3)),
        "workers": {
            "count": n,
            "personas": draw(st.lists(st.sampled_from(PERSONAS), min_size=1, max_size=7)),
            "overrides": overrides,
        },
        "budget": {
            "credits": draw(st.sampled_from([0, 1, 10, 100, 1000])),
            "reset_each_subrun": draw(st.booleans()),
        },
        "deadline": {"minutes": draw(st.sampled_from([1, 2, 3.5, 6, 10]))},
        "memory": {
            "enabled": draw(st.booleans()),
            "max_chars": draw(st.sampled_from([0, 80, 4000])),
        },
        "negotiation": {
            "conversation": draw(st.booleans()),
            "max_turns": draw(st.integers(0, 3)),
            "bids": draw(st.sampled_from(["revisable", "fixed"])),
        },
        "windows": {"min_s": min_s, "max_s": max_s},
        "mechanism": {
            "aggregation": draw(
                st.sampled_from(["kemeny", "borda", "price_only", "consensus_else_price"])
            ),
            "payment": draw(st.sampled_from(["pay_your_bid", "next_price", "none"])),
            "allocation": draw(st.sampled_from(["median_ballot", "declared"])),
            "kemeny_exact_max": draw(st.integers(1, 8)),
        },
        "tasks": {
            "assignment": draw(st.sampled_from(["rotate", "random", "same"])),
            "work_scale": draw(st.sampled_from([0.1, 0.5, 1.0, 2.0])),
        },
    }


@settings(FAST, max_examples=1000)
@given(params=conditions(), seed=st.integers(0, 2**32 - 1))
def test_invariants_hold_for_random_conditions(params: dict[str, Any], seed: int) -> None:
    """Credits conserved, no negative budgets, one holder at a time, nothing past a deadline,
    payments only at window start, a completed run, seq 0..n-1, and every line on the schema."""
    cond = condition(params)
    check_invariants(run(cond, seed), cond)


@settings(FAST, max_examples=60)
@given(
    seed=st.integers(0, 2**32 - 1),
    name=st.sampled_from(
        ["base", "memory_off", "fixed_bids", "urgent_worker", "rich_worker", "deadline_10"]
    ),
)
def test_invariants_hold_for_shipped_conditions(seed: int, name: str) -> None:
    """The shipped params files (full size: 5 workers x 4 subruns) keep every invariant."""
    from mbb.params import load_params

    cond = load_params(f"params/{name}.yaml")
    check_invariants(run(cond, seed), cond)

"""Property tests: protocol invariants over thousands of small random conditions.

Each example is a small condition (1-6 workers, 1-3 subruns, short deadlines) so a run takes a
few milliseconds; the invariants themselves are in `helpers.check_invariants`: credits are
conserved (rebuilt from events and compared with the arena's ledger), no budget goes negative,
one holder at a time, no window at/after its holder's deadline, payments only at window start,
the run ends `completed`, `seq` runs 0..n-1, and every line validates against the schema.

Two sweeps share one condition builder: a structured one (hypothesis draws every field, so a
failure shrinks to a minimal condition) and a cheaper, larger one where hypothesis draws only
a seed for the builder (drawing ~40 fields costs as much as the run itself); its failing
condition is printed through `note`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from helpers import check_invariants, condition, run
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from mbb.agents.personas import PERSONAS
from mbb.batch.build import load_params

T = TypeVar("T")
FAST = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def build_params(
    choice: Callable[[Sequence[T]], T], integer: Callable[[int, int], int]
) -> dict[str, Any]:
    """A random small condition, drawn through `choice(options)` and `integer(lo, hi)`."""
    n = integer(1, 6)
    min_s = integer(5, 120)
    max_s = integer(min_s, 360)
    overrides = {}
    for i in range(1, n + 1):
        if not choice([True, False, False]):
            continue
        o: dict[str, Any] = {}
        if choice([True, False]):
            o["budget"] = choice([0, 1, 7, 50, 400, 3000])
        if choice([True, False]):
            o["deadline_min"] = choice([0.5, 1, 2.5, 4, 6, 12])
        if choice([True, False]):
            o["persona"] = choice(PERSONAS.names())
        overrides[f"W{i}"] = o
    return {
        "name": "prop",
        "subruns": integer(1, 3),
        "workers": {
            "count": n,
            "personas": [choice(PERSONAS.names()) for _ in range(choice([1, n]))],
            "overrides": overrides,
        },
        "budget": {
            "credits": choice([0, 1, 10, 100, 1000]),
            "reset_each_subrun": choice([True, False]),
        },
        "deadline": {"minutes": choice([1, 2, 3.5, 6, 10])},
        "memory": {"enabled": choice([True, False]), "max_chars": choice([0, 80, 4000])},
        "negotiation": {
            "conversation": choice([True, False]),
            "max_turns": integer(0, 3),
            "bids": choice(["revisable", "fixed"]),
        },
        "windows": {"min_s": min_s, "max_s": max_s},
        "mechanism": {
            "aggregation": choice(["kemeny", "borda", "price_only", "consensus_else_price"]),
            "payment": choice(["pay_your_bid", "next_price", "none"]),
            "allocation": choice(["median_ballot", "declared"]),
            "kemeny_exact_max": integer(1, 8),
        },
        "tasks": {
            "assignment": choice(["rotate", "random", "same"]),
            "work_scale": choice([0.1, 0.5, 1.0, 2.0]),
        },
    }


@st.composite
def conditions(draw: st.DrawFn) -> dict[str, Any]:
    return build_params(
        lambda options: draw(st.sampled_from(options)), lambda lo, hi: draw(st.integers(lo, hi))
    )


@settings(FAST, max_examples=150)
@given(params=conditions(), seed=st.integers(0, 2**32 - 1))
def test_invariants_hold_for_random_conditions_shrinkable(params: dict[str, Any], seed: int):
    cond = condition(params)
    check_invariants(run(cond, seed), cond)


@settings(FAST, max_examples=850)
@given(spec=st.integers(0, 2**64 - 1), seed=st.integers(0, 2**32 - 1))
def test_invariants_hold_for_many_random_conditions(spec: int, seed: int) -> None:
    rng = random.Random(spec)
    params = build_params(rng.choice, rng.randint)
    note(f"params={params!r} seed={seed}")
    cond = condition(params)
    check_invariants(run(cond, seed), cond)


@settings(FAST, max_examples=30)
@given(
    seed=st.integers(0, 2**32 - 1),
    name=st.sampled_from(
        ["base", "memory_off", "fixed_bids", "urgent_worker", "rich_worker", "deadline_10"]
    ),
)
def test_invariants_hold_for_shipped_conditions(seed: int, name: str) -> None:
    """The shipped params files (full size: 5 workers x 4 subruns) keep every invariant."""
    cond = load_params(f"params/{name}.yaml")
    check_invariants(run(cond, seed), cond)

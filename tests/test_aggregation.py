"""Every aggregation rule against a brute-force reference on small cases.

Reading of the protocol (README, aggregation.py): the tie-break order is bid descending,
then queue order (the order of `candidates`). Kemeny returns, among all rankings with the
minimum total Kendall-tau disagreement with the ballots, the lexicographically first one when
rankings are compared position by position in tie-break order.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mbb.protocol.rules import aggregate
from mbb.protocol.scheduling.aggregation import (
    borda,
    kemeny,
    kemeny_disagreement,
    tie_break_order,
)

FAST = settings(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


# --- references (deliberately naive) -----------------------------------------------------------
def ref_tiebreak(candidates: Sequence[str], bids: dict[str, int]) -> list[str]:
    out = list(candidates)
    # insertion sort: a higher bid goes first; equal bids keep queue order
    for i in range(1, len(out)):
        j = i
        while j > 0 and bids[out[j - 1]] < bids[out[j]]:
            out[j - 1], out[j] = out[j], out[j - 1]
            j -= 1
    return out


def ref_kendall(order: Sequence[str], ballot: Sequence[str]) -> int:
    """Pairs the two rankings order differently."""
    pos = {c: i for i, c in enumerate(ballot)}
    return sum(
        1
        for a, b in itertools.combinations(order, 2)  # a before b in `order`
        if pos[a] > pos[b]
    )


def ref_kemeny(tb: list[str], ballots: list[list[str]]) -> list[str]:
    rank = {c: i for i, c in enumerate(tb)}
    best: tuple[int, tuple[int, ...]] | None = None
    best_perm: tuple[str, ...] = ()
    for perm in itertools.permutations(tb):
        key = (sum(ref_kendall(perm, b) for b in ballots), tuple(rank[c] for c in perm))
        if best is None or key < best:
            best, best_perm = key, perm
    return list(best_perm)


def ref_borda(tb: list[str], ballots: list[list[str]]) -> list[str]:
    n = len(tb)
    score = {c: sum(n - 1 - b.index(c) for b in ballots) for c in tb}
    out: list[str] = []
    for c in tb:  # stable insertion: strictly higher score moves ahead
        i = len(out)
        while i > 0 and score[out[i - 1]] < score[c]:
            i -= 1
        out.insert(i, c)
    return out


# --- strategies ---------------------------------------------------------------------------------
@st.composite
def elections(draw: st.DrawFn, max_n: int = 6, max_voters: int = 6):
    n = draw(st.integers(1, max_n))
    candidates = [f"W{i}" for i in draw(st.permutations(range(1, n + 1)))]
    bids = {c: draw(st.sampled_from([0, 5, 5, 10, 50])) for c in candidates}  # many ties
    voters = draw(st.integers(1, max_voters))
    ballots = [list(draw(st.permutations(candidates))) for _ in range(voters)]
    return candidates, ballots, bids


@settings(FAST, max_examples=100)
@given(elections(max_n=7))
def test_tie_break_order_is_bid_descending_then_queue_order(election) -> None:
    candidates, _, bids = election
    assert tie_break_order(candidates, bids) == ref_tiebreak(candidates, bids)


@settings(FAST, max_examples=200)
@given(elections(max_n=6))
def test_kemeny_matches_brute_force_over_all_permutations(election) -> None:
    candidates, ballots, bids = election
    tb = ref_tiebreak(candidates, bids)
    expected = ref_kemeny(tb, ballots)
    assert kemeny(tb, ballots) == expected
    result = aggregate("kemeny", candidates, ballots, bids, exact_max=8)
    assert result.order == expected and result.rule == "kemeny"


@settings(FAST, max_examples=8)
@given(elections(max_n=7, max_voters=4).filter(lambda e: len(e[0]) == 7))
def test_kemeny_matches_brute_force_with_seven_candidates(election) -> None:
    candidates, ballots, bids = election
    tb = ref_tiebreak(candidates, bids)
    assert kemeny(tb, ballots) == ref_kemeny(tb, ballots)


@settings(FAST, max_examples=100)
@given(elections(max_n=6))
def test_kemeny_disagreement_is_summed_kendall_tau(election) -> None:
    candidates, ballots, _ = election
    assert kemeny_disagreement(candidates, ballots) == sum(
        ref_kendall(candidates, b) for b in ballots
    )


@settings(FAST, max_examples=150)
@given(elections(max_n=7))
def test_borda_matches_reference_with_ties_in_tie_break_order(election) -> None:
    candidates, ballots, bids = election
    tb = ref_tiebreak(candidates, bids)
    assert borda(tb, ballots) == ref_borda(tb, ballots)
    result = aggregate("borda", candidates, ballots, bids)
    assert result.order == ref_borda(tb, ballots) and result.rule == "borda"


@settings(FAST, max_examples=100)
@given(elections(max_n=7))
def test_price_only_ignores_ballots(election) -> None:
    candidates, ballots, bids = election
    result = aggregate("price_only", candidates, ballots, bids)
    assert result.order == ref_tiebreak(candidates, bids) and result.rule == "price_only"


@settings(FAST, max_examples=150)
@given(elections(max_n=6), st.booleans())
def test_consensus_else_price(election, unanimous: bool) -> None:
    """A unanimous ballot order wins as is; any disagreement falls back to price order."""
    candidates, ballots, bids = election
    if unanimous:
        ballots = [list(ballots[0]) for _ in ballots]
    result = aggregate("consensus_else_price", candidates, ballots, bids)
    if all(b == ballots[0] for b in ballots):
        assert result.order == ballots[0] and result.rule == "consensus"
    else:
        assert result.order == ref_tiebreak(candidates, bids) and result.rule == "price_only"


@pytest.mark.parametrize(
    ("n", "exact_max", "rule"),
    [
        (3, 3, "kemeny"),
        (4, 3, "borda (kemeny fallback)"),
        (9, 8, "borda (kemeny fallback)"),
        (8, 8, "kemeny"),
        (1, 1, "kemeny"),
    ],
)
def test_kemeny_falls_back_to_borda_above_exact_max_and_says_so(n, exact_max, rule) -> None:
    candidates = [f"W{i}" for i in range(1, n + 1)]
    ballots = [list(reversed(candidates)), candidates[1:] + candidates[:1]]
    bids = {c: i % 3 for i, c in enumerate(candidates)}
    result = aggregate("kemeny", candidates, ballots, bids, exact_max=exact_max)
    assert result.rule == rule
    tb = ref_tiebreak(candidates, bids)
    expected = ref_borda(tb, ballots) if "fallback" in rule else kemeny(tb, ballots)
    assert result.order == expected


@pytest.mark.parametrize(
    ("ballots", "bids", "expected"),
    [
        # a Condorcet cycle: every ranking of the cycle costs the same; bids decide
        (
            [["A", "B", "C"], ["B", "C", "A"], ["C", "A", "B"]],
            {"A": 0, "B": 0, "C": 0},
            ["A", "B", "C"],
        ),
        (
            [["A", "B", "C"], ["B", "C", "A"], ["C", "A", "B"]],
            {"A": 0, "B": 0, "C": 9},
            ["C", "A", "B"],
        ),
        # a majority wins over money
        (
            [["C", "B", "A"], ["C", "B", "A"], ["A", "B", "C"]],
            {"A": 99, "B": 0, "C": 0},
            ["C", "B", "A"],
        ),
        # two opposite ballots: all orders that keep B in the middle tie; bids then queue decide
        ([["A", "B", "C"], ["C", "B", "A"]], {"A": 1, "B": 1, "C": 1}, ["A", "B", "C"]),
    ],
)
def test_kemeny_worked_examples(ballots, bids, expected) -> None:
    assert aggregate("kemeny", ["A", "B", "C"], ballots, bids).order == expected


def test_unknown_rule_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown aggregation rule 'plurality'"):
        aggregate("plurality", ["A"], [["A"]], {"A": 0})

"""Aggregation rules: many ballots (full rankings) -> one order of the candidates.

Every rule breaks remaining ties by a *tie-break order*: higher bid first, then earlier queue
position. The order is therefore always a deterministic function of (ballots, bids, queue).

- `kemeny`: the ranking that minimises total pairwise disagreement with the ballots (the
  consensus/median ranking). Exact by dynamic programming over subsets (O(2^n n^2)) up to
  `exact_max` candidates; beyond that Borda is used and the schedule records the fallback.
- `borda`: position points (n-1 for first ... 0 for last), summed.
- `price_only`: bids decide; ballots are ignored.
- `consensus_else_price`: a unanimous ballot order if there is one, otherwise price order.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

__all__ = [
    "AggregationResult",
    "borda",
    "borda_rule",
    "consensus_else_price_rule",
    "kemeny",
    "kemeny_disagreement",
    "kemeny_rule",
    "pairwise_matrix",
    "price_only_rule",
    "tie_break_order",
]


class AggregationResult(tuple):
    """(order, rule_applied) — a tuple so it is cheap and immutable."""

    __slots__ = ()

    def __new__(cls, order: list[str], rule: str) -> AggregationResult:
        return super().__new__(cls, (order, rule))

    @property
    def order(self) -> list[str]:
        return self[0]

    @property
    def rule(self) -> str:
        return self[1]


def tie_break_order(candidates: Sequence[str], bids: Mapping[str, int]) -> list[str]:
    """Higher bid first, then queue order (the order of `candidates`)."""
    pos = {c: i for i, c in enumerate(candidates)}
    return sorted(candidates, key=lambda c: (-bids.get(c, 0), pos[c]))


def pairwise_matrix(candidates: Sequence[str], ballots: Sequence[Sequence[str]]) -> list[list[int]]:
    """P[i][j] = number of ballots that rank candidate i above candidate j."""
    idx = {c: i for i, c in enumerate(candidates)}
    n = len(candidates)
    p = [[0] * n for _ in range(n)]
    for ballot in ballots:
        ranks = [idx[c] for c in ballot]
        for a in range(n):
            row = p[ranks[a]]
            for b in range(a + 1, n):
                row[ranks[b]] += 1
    return p


def kemeny_disagreement(order: Sequence[str], ballots: Sequence[Sequence[str]]) -> int:
    """Kendall-tau distance summed over ballots (the Kemeny objective)."""
    cands = list(order)
    p = pairwise_matrix(cands, ballots)
    n = len(cands)
    return sum(p[j][i] for i in range(n) for j in range(i + 1, n))


def kemeny(tiebreak: Sequence[str], ballots: Sequence[Sequence[str]]) -> list[str]:
    """Exact Kemeny ranking; among optimal rankings, the first in tie-break lexicographic order.

    `tiebreak` lists the candidates in tie-break order. Dynamic programming over the set R of
    candidates still to place: cost[R] = min over the next candidate j of
    (ballots preferring some other member of R to j) + cost[R - {j}]. The inner sums are
    tabulated per j over all subsets first (O(n 2^n)), so the DP itself is O(n 2^n) too.
    """
    n = len(tiebreak)
    if n <= 1:
        return list(tiebreak)
    p = pairwise_matrix(tiebreak, ballots)
    size = 1 << n
    # against[j][m] = sum over i in m of P[i][j] (voters preferring i to j), for every subset m:
    # the subsets with element i are those without it, shifted by bit i
    against = []
    for j in range(n):
        t = [0]
        for i in range(n):
            pij = p[i][j]
            t += [x + pij for x in t]
        against.append(t)
    cost = [0] * size
    moves = _moves(n)
    for r in range(1, size):
        cost[r] = min([cost[rest] + against[j][rest] for j, rest in moves[r]])
    order: list[str] = []
    r = size - 1
    while r:
        for j, rest in moves[r]:  # in tie-break order: the first optimal choice wins
            if cost[rest] + against[j][rest] == cost[r]:
                order.append(tiebreak[j])
                r = rest
                break
    return order


@functools.cache
def _moves(n: int) -> list[list[tuple[int, int]]]:
    """For every subset r of n candidates, (j, r without j) for each member j, in order."""
    return [[(j, r ^ 1 << j) for j in range(n) if r >> j & 1] for r in range(1 << n)]


def borda(tiebreak: Sequence[str], ballots: Sequence[Sequence[str]]) -> list[str]:
    """Borda count; equal scores keep tie-break order."""
    n = len(tiebreak)
    score = dict.fromkeys(tiebreak, 0)
    for ballot in ballots:
        for pos, c in enumerate(ballot):
            score[c] += n - 1 - pos
    rank = {c: i for i, c in enumerate(tiebreak)}
    return sorted(tiebreak, key=lambda c: (-score[c], rank[c]))


def kemeny_rule(
    tiebreak: Sequence[str], ballots: Sequence[Sequence[str]], exact_max: int
) -> AggregationResult:
    """Exact Kemeny up to `exact_max` candidates; Borda beyond (recorded as a fallback)."""
    if len(tiebreak) > exact_max:
        return AggregationResult(borda(tiebreak, ballots), "borda (kemeny fallback)")
    return AggregationResult(kemeny(tiebreak, ballots), "kemeny")


def borda_rule(
    tiebreak: Sequence[str], ballots: Sequence[Sequence[str]], exact_max: int
) -> AggregationResult:
    return AggregationResult(borda(tiebreak, ballots), "borda")


def price_only_rule(
    tiebreak: Sequence[str], ballots: Sequence[Sequence[str]], exact_max: int
) -> AggregationResult:
    """Bids decide (the tie-break order itself); ballots are ignored."""
    return AggregationResult(list(tiebreak), "price_only")


def consensus_else_price_rule(
    tiebreak: Sequence[str], ballots: Sequence[Sequence[str]], exact_max: int
) -> AggregationResult:
    """A unanimous ballot order if there is one, otherwise the price (tie-break) order."""
    first = tuple(ballots[0]) if ballots else None
    if first is not None and all(tuple(b) == first for b in ballots):
        return AggregationResult(list(first), "consensus")
    return AggregationResult(list(tiebreak), "price_only")

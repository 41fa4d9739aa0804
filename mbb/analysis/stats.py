"""Significance tests with numpy and the standard library only (scipy is not a dependency)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["chi2_contingency", "chi2_sf", "permutation_pvalue"]


def _gammainc_lower_series(a: float, x: float) -> float:
    term = total = 1.0 / a
    n = a
    for _ in range(10_000):
        n += 1
        term *= x / n
        total += term
        if abs(term) < abs(total) * 1e-15:
            break
    return total * math.exp(-x + a * math.log(x) - math.lgamma(a))


def _gammainc_upper_cf(a: float, x: float) -> float:
    tiny = 1e-300
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return math.exp(-x + a * math.log(x) - math.lgamma(a)) * h


def chi2_sf(x: float, dof: int) -> float:
    """P(X >= x) for X ~ chi-square(dof): the regularized upper incomplete gamma Q(dof/2, x/2)."""
    if dof <= 0:
        raise ValueError(f"dof must be positive, got {dof}")
    if x <= 0:
        return 1.0
    a, z = dof / 2.0, x / 2.0
    if z < a + 1:
        return max(0.0, 1.0 - _gammainc_lower_series(a, z))
    return min(1.0, _gammainc_upper_cf(a, z))


def chi2_contingency(table: np.ndarray) -> tuple[float, int, float]:
    """Pearson chi-square test of independence: (statistic, dof, p). Empty rows/columns are
    dropped; returns (0, 0, 1.0) when fewer than two rows or columns remain."""
    t = np.asarray(table, dtype=float)
    t = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0] if t.size else t
    if t.ndim != 2 or t.shape[0] < 2 or t.shape[1] < 2:
        return 0.0, 0, 1.0
    expected = t.sum(axis=1, keepdims=True) * t.sum(axis=0, keepdims=True) / t.sum()
    stat = float(((t - expected) ** 2 / expected).sum())
    dof = (t.shape[0] - 1) * (t.shape[1] - 1)
    return stat, dof, chi2_sf(stat, dof)


def permutation_pvalue(x: np.ndarray, groups: np.ndarray, *, n: int = 2000, seed: int = 0) -> float:
    """Two-sided permutation p-value for a difference in means between the first and last group
    level (sorted), shuffling group labels."""
    x = np.asarray(x, dtype=float)
    g = np.asarray(groups)
    lv = np.unique(g)
    if lv.size < 2:
        return 1.0
    a, b = g == lv[0], g == lv[-1]
    obs = abs(x[b].mean() - x[a].mean())
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        p = rng.permutation(g)
        hits += abs(x[p == lv[-1]].mean() - x[p == lv[0]].mean()) >= obs - 1e-12
    return (hits + 1) / (n + 1)

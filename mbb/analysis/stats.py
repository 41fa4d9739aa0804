"""Significance tests, bootstrap intervals, effect sizes and power, with numpy and the standard
library (scipy is not a dependency); `condition_differences` takes and returns polars tables."""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np
import polars as pl

__all__ = [
    "bootstrap_ci",
    "chi2_contingency",
    "chi2_sf",
    "compare_samples",
    "condition_differences",
    "diff_bootstrap_ci",
    "hedges_g",
    "holm_adjust",
    "paired_bootstrap_ci",
    "paired_effect_size",
    "permutation_pvalue",
    "power_curve",
    "power_sentence",
    "seed_summary",
    "seeds_for_power",
]


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
    dropped; with fewer than two rows or columns left there is nothing to test: (nan, 0, nan),
    not a p of 1 that would read as a test that found nothing."""
    t = np.asarray(table, dtype=float)
    t = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0] if t.size else t
    if t.ndim != 2 or t.shape[0] < 2 or t.shape[1] < 2:
        return math.nan, 0, math.nan
    expected = t.sum(axis=1, keepdims=True) * t.sum(axis=0, keepdims=True) / t.sum()
    stat = float(((t - expected) ** 2 / expected).sum())
    dof = (t.shape[0] - 1) * (t.shape[1] - 1)
    return stat, dof, chi2_sf(stat, dof)


def holm_adjust(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of a family of p-values (controls the family-wise error
    rate): the k-th smallest of m is multiplied by m - k + 1, then made non-decreasing in that
    order and capped at 1. A missing p (None or NaN: nothing was tested) stays None and is not
    counted in m. Returned in the order given."""
    tested = [(p, i) for i, p in enumerate(p_values) if p is not None and not math.isnan(float(p))]
    out: list[float | None] = [None] * len(p_values)
    m = len(tested)
    running = 0.0
    for k, (p, i) in enumerate(sorted(tested)):
        running = max(running, min(1.0, (m - k) * float(p)))
        out[i] = running
    return out


def permutation_pvalue(x: np.ndarray, groups: np.ndarray, *, n: int = 2000, seed: int = 0) -> float:
    """Two-sided permutation p-value for a difference in means between the first and last group
    level (sorted), shuffling group labels; nan with one level (nothing to test)."""
    x = np.asarray(x, dtype=float)
    g = np.asarray(groups)
    lv = np.unique(g)
    if lv.size < 2:
        return math.nan  # one group: nothing to test
    a, b = g == lv[0], g == lv[-1]
    obs = abs(x[b].mean() - x[a].mean())
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        p = rng.permutation(g)
        hits += abs(x[p == lv[-1]].mean() - x[p == lv[0]].mean()) >= obs - 1e-12
    return (hits + 1) / (n + 1)


# --- comparisons over seeds ---------------------------------------------------------------------
# Every interval here is an *expanded percentile* bootstrap over seeds (runs), mbb's choice:
# the seed is the unit of replication, since rounds and workers within a run are not
# independent. Percentile rather than BCa: with 5-30 seeds BCa's acceleration estimate is
# itself noisy; expanded (`expanded_level`) because the plain percentile interval undercovers
# at such n. The planted/null tests (tests/analysis/test_planted_null.py,
# test_planted_effects.py) check the intervals' coverage directly. Two independent samples are
# widened for the smaller one.


N_RESAMPLES = 2000


def _finite(values: object) -> np.ndarray:
    x = np.asarray(values, dtype=float).ravel()
    return x[np.isfinite(x)]


def t_quantile(p: float, df: int) -> float:
    """Quantile of Student's t (df >= 1) by bisection on its CDF, integrated numerically
    (accurate to ~1e-6, ample for an interval's width). p: probability in (0, 1); df: degrees
    of freedom."""
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def cdf(x: float) -> float:
        grid = np.linspace(0.0, x, 4001)
        dens = c * (1.0 + grid**2 / df) ** (-(df + 1) / 2)
        return 0.5 + float(np.sum((dens[1:] + dens[:-1]) * np.diff(grid)) / 2)

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def expanded_level(level: float, n: int) -> float:
    """The percentile level that the expanded percentile bootstrap (Hesterberg 2015) reads
    off the resampled means for a nominal `level` with `n` seeds: the plain percentile interval
    covers too little with a handful of seeds (about 85 % for a nominal 95 % at n = 5), so its
    tail is shrunk until the normal quantile equals sqrt(n / (n - 1)) x Student's t quantile
    with n - 1 degrees of freedom. level: nominal coverage in (0, 1); n: seeds (>= 2)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    tail = (1.0 - level) / 2.0
    z = math.sqrt(n / (n - 1)) * t_quantile(1.0 - tail, n - 1)
    return 1.0 - 2.0 * (1.0 - NormalDist().cdf(z))


def _quantiles(stat: np.ndarray, level: float, n: int) -> tuple[float, float]:
    """The expanded percentile interval of the resampled statistic `stat` of `n` seeds."""
    wide = expanded_level(level, n)
    lo, hi = np.quantile(stat, [(1 - wide) / 2, (1 + wide) / 2])
    return float(lo), float(hi)


def bootstrap_ci(
    values: object, *, n_resamples: int = N_RESAMPLES, level: float = 0.95, seed: int = 0
) -> tuple[float, float] | None:
    """Expanded percentile bootstrap CI of the mean of `values` (one value per seed).

    values: per-seed values; NaN/None are dropped. n_resamples: bootstrap resamples.
    level: coverage (0.95 = 95 %). seed: the resampling RNG seed (same input, same interval).
    Returns (low, high), or None with fewer than 2 values (no spread to resample).
    """
    x = _finite(values)
    if x.size < 2:
        return None
    rng = np.random.default_rng(seed)
    stat = x[rng.integers(0, x.size, (n_resamples, x.size))].mean(axis=1)
    return _quantiles(stat, level, x.size)


def diff_bootstrap_ci(
    a: object,
    b: object,
    *,
    n_resamples: int = N_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Expanded percentile bootstrap CI of mean(a) - mean(b), the two samples (seeds of two
    conditions) resampled independently. a, b: per-seed values; other parameters as in
    `bootstrap_ci`. None when either sample has fewer than 2 values."""
    x, y = _finite(a), _finite(b)
    if x.size < 2 or y.size < 2:
        return None
    rng = np.random.default_rng(seed)
    sx = x[rng.integers(0, x.size, (n_resamples, x.size))].mean(axis=1)
    sy = y[rng.integers(0, y.size, (n_resamples, y.size))].mean(axis=1)
    return _quantiles(sx - sy, level, min(x.size, y.size))  # widened for the smaller sample


def paired_bootstrap_ci(
    a: object,
    b: object,
    *,
    n_resamples: int = N_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Expanded percentile bootstrap CI of mean(a - b) over pairs (the same seed under two
    conditions): pairs are resampled together, so what the seed fixes (workload, personas'
    seats) cancels. a, b: equally long per-seed values, pair i = seed i; a pair with a NaN is
    dropped. Other parameters as in `bootstrap_ci`. None with fewer than 2 pairs."""
    x = np.asarray(a, dtype=float).ravel()
    y = np.asarray(b, dtype=float).ravel()
    if x.size != y.size:
        raise ValueError(f"paired samples differ in length: {x.size} vs {y.size}")
    return bootstrap_ci(x - y, n_resamples=n_resamples, level=level, seed=seed)


def seed_summary(
    per_run: pl.DataFrame,
    by: Sequence[str],
    values: Sequence[str],
    *,
    n_resamples: int = N_RESAMPLES,
    level: float = 0.95,
) -> pl.DataFrame:
    """The mean over seeds of each of `values` per group of `by`, with its expanded percentile
    bootstrap CI (`bootstrap_ci`): what a chart of a mean draws. Long form: `by`..., measure,
    n (seeds with a value), mean, ci_low, ci_high (null with fewer than 2 seeds: no interval).

    per_run: one row per run (and per group of `by`): the seed is the unit resampled;
    by: the grouping columns; values: the numeric columns summarised; n_resamples, level: as
    in `bootstrap_ci`."""
    keys = list(by)
    rows: list[dict[str, object]] = []
    groups = (
        per_run.partition_by(keys, as_dict=True, maintain_order=True) if keys else {(): per_run}
    )
    for key, part in groups.items():
        for m in values:
            x = _finite(part[m].drop_nulls().to_numpy())
            ci = bootstrap_ci(x, n_resamples=n_resamples, level=level)
            rows.append(
                {
                    **dict(zip(keys, key, strict=True)),
                    "measure": m,
                    "n": int(x.size),
                    "mean": float(x.mean()) if x.size else None,
                    "ci_low": ci[0] if ci else None,
                    "ci_high": ci[1] if ci else None,
                }
            )
    schema = {k: per_run.schema[k] for k in keys} | {
        "measure": pl.String,
        "n": pl.Int64,
        "mean": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def hedges_g(a: object, b: object) -> float:
    """Standardised mean difference (mean(a) - mean(b)) / pooled sd, small-sample corrected
    (Hedges' g). NaN when either sample has fewer than 2 values or both have no spread."""
    x, y = _finite(a), _finite(b)
    if x.size < 2 or y.size < 2:
        return float("nan")
    dof = x.size + y.size - 2
    pooled = math.sqrt(((x.size - 1) * x.var(ddof=1) + (y.size - 1) * y.var(ddof=1)) / dof)
    if pooled == 0:
        return float("nan")
    return float((x.mean() - y.mean()) / pooled * (1 - 3 / (4 * dof - 1)))


def paired_effect_size(a: object, b: object) -> float:
    """Cohen's d_z for paired samples: mean(a - b) / sd(a - b). NaN with fewer than 2 pairs
    or no spread in the differences."""
    d = _finite(np.asarray(a, dtype=float) - np.asarray(b, dtype=float))
    if d.size < 2 or d.std(ddof=1) == 0:
        return float("nan")
    return float(d.mean() / d.std(ddof=1))


def compare_samples(
    a: object,
    b: object,
    *,
    paired: bool = False,
    n_resamples: int = N_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, float | int | bool | str | None]:
    """One condition difference (a minus b) with its effect size, bootstrap CI and n.

    a, b: per-seed values of a measure under the two conditions. paired: a[i] and b[i] are
    the same seed (then the CI resamples pairs and the effect size is d_z; else seeds are
    resampled independently and the effect size is Hedges' g). Other parameters as in
    `bootstrap_ci`. `excludes_zero` says whether the CI lies entirely on one side of 0 (None
    when there is no CI).
    """
    x = np.asarray(a, dtype=float).ravel()
    y = np.asarray(b, dtype=float).ravel()
    if paired:
        ci = paired_bootstrap_ci(x, y, n_resamples=n_resamples, level=level, seed=seed)
        keep = np.isfinite(x) & np.isfinite(y)
        x, y = x[keep], y[keep]
        es, kind = paired_effect_size(x, y), "d_z"
    else:
        ci = diff_bootstrap_ci(x, y, n_resamples=n_resamples, level=level, seed=seed)
        x, y = _finite(x), _finite(y)
        es, kind = hedges_g(x, y), "hedges_g"
    diff = float(x.mean() - y.mean()) if x.size and y.size else None
    return {
        "n_a": int(x.size),
        "n_b": int(y.size),
        "mean_a": float(x.mean()) if x.size else None,
        "mean_b": float(y.mean()) if y.size else None,
        "diff": diff,
        "ci_low": ci[0] if ci else None,
        "ci_high": ci[1] if ci else None,
        "effect_size": None if math.isnan(es) else es,
        "effect_size_kind": kind,
        "paired": paired,
        # no interval (fewer than 2 seeds a side), no verdict: None, not "no"
        "excludes_zero": None if ci is None else bool(ci[0] > 0 or ci[1] < 0),
    }


def condition_differences(
    per_seed: pl.DataFrame,
    measures: list[str],
    baseline: str,
    *,
    condition: str = "condition",
    seed_col: str = "seed",
    n_resamples: int = N_RESAMPLES,
    level: float = 0.95,
) -> pl.DataFrame:
    """Every condition against `baseline` on every measure: a polars table (condition,
    measure, n, n_baseline, mean, baseline_mean, diff, ci_low, ci_high, effect_size,
    effect_size_kind, paired, excludes_zero).

    per_seed: a polars DataFrame with one row per run: `condition`, `seed_col` and the
    measure columns. measures: the columns to compare. baseline: the reference condition.
    condition, seed_col: column names. Comparisons are paired (same seed in both conditions)
    when every seed of the condition also ran under the baseline (each seed once), else
    independent.
    n_resamples, level: as in `bootstrap_ci`.
    """
    df = per_seed
    for col in (condition, seed_col, *measures):
        if col not in df.columns:
            raise ValueError(f"per-seed table has no column {col!r}")
    base = df.filter(pl.col(condition) == baseline).sort(seed_col)
    if base.is_empty():
        raise ValueError(f"no runs of the baseline condition {baseline!r}")
    rows = []
    for cond in sorted(set(df[condition].to_list()) - {baseline}):
        cur = df.filter(pl.col(condition) == cond).sort(seed_col)
        paired = (
            cur.height >= 2
            and cur[seed_col].is_unique().all()
            and base[seed_col].is_unique().all()
            and set(cur[seed_col]) <= set(base[seed_col])
        )
        for m in measures:
            if paired:
                j = cur.select(seed_col, m).join(
                    base.select(seed_col, pl.col(m).alias("_b")), on=seed_col
                )
                a, b = j[m].to_numpy(), j["_b"].to_numpy()
            else:
                a, b = cur[m].to_numpy(), base[m].to_numpy()
            r = compare_samples(a, b, paired=paired, n_resamples=n_resamples, level=level)
            rows.append(
                {
                    condition: cond,
                    "measure": m,
                    "n": r["n_a"],
                    "n_baseline": r["n_b"],
                    "mean": r["mean_a"],
                    "baseline_mean": r["mean_b"],
                    "diff": r["diff"],
                    "ci_low": r["ci_low"],
                    "ci_high": r["ci_high"],
                    "effect_size": r["effect_size"],
                    "effect_size_kind": r["effect_size_kind"],
                    "paired": r["paired"],
                    "excludes_zero": r["excludes_zero"],
                }
            )
    schema = {
        condition: pl.String,
        "measure": pl.String,
        "n": pl.Int64,
        "n_baseline": pl.Int64,
        "mean": pl.Float64,
        "baseline_mean": pl.Float64,
        "diff": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
        "effect_size": pl.Float64,
        "effect_size_kind": pl.String,
        "paired": pl.Boolean,
        "excludes_zero": pl.Boolean,
    }
    return pl.DataFrame(rows, schema=schema)


def _detect_rate(
    pilot_a: np.ndarray,
    pilot_b: np.ndarray,
    shift: float,
    n: int,
    *,
    paired: bool,
    n_sim: int,
    n_resamples: int,
    level: float,
    rng: np.random.Generator,
) -> float:
    """Share of simulated studies of `n` seeds per condition whose percentile-bootstrap CI of
    the difference excludes 0 on the side of `shift`."""
    # under the alternative: the pilot's differences (paired) or its first sample (independent)
    # moved so the true difference is `shift`
    d = pilot_a - pilot_b - (pilot_a - pilot_b).mean() + shift if paired else pilot_a
    a = pilot_a - pilot_a.mean() + pilot_b.mean() + shift
    hits = 0
    for _ in range(n_sim):  # one simulated study at a time keeps memory at n_resamples x n
        idx = rng.integers(0, n, (n_resamples, n))
        if paired:
            sd = d[rng.integers(0, d.size, n)]
            stat = sd[idx].mean(axis=1)
        else:
            sa = a[rng.integers(0, a.size, n)]
            sb = pilot_b[rng.integers(0, pilot_b.size, n)]
            stat = sa[idx].mean(axis=1) - sb[rng.integers(0, n, (n_resamples, n))].mean(axis=1)
        lo, hi = _quantiles(stat, level, n)
        hits += lo > 0 if shift >= 0 else hi < 0
    return hits / n_sim


def power_curve(
    pilot: object,
    effect: float,
    seeds: list[int],
    *,
    pilot_b: object = None,
    paired: bool = False,
    n_sim: int = 200,
    n_resamples: int = 400,
    level: float = 0.95,
    seed: int = 0,
) -> list[tuple[int, float]]:
    """Simulated power at each number of seeds: (seeds, share of studies detecting `effect`).

    pilot: per-seed values of the measure from pilot runs (the spread a study will see).
    effect: the difference (treated minus baseline) to detect, in the measure's units.
    seeds: the numbers of seeds per condition to try. pilot_b: per-seed values of the other
    condition, when the two spreads differ (default: `pilot` for both); with paired=True,
    pilot[i] and pilot_b[i] are one seed under the two conditions and the paired differences
    are resampled. A simulated study draws that many seeds (with replacement) from the pilot,
    shifts one condition so the true difference is `effect`, and detects it when its
    percentile-bootstrap CI (n_resamples, level) excludes 0 on the effect's side.
    n_sim: simulated studies per point. seed: RNG seed.
    """
    a = _finite(pilot)
    b = a if pilot_b is None else _finite(pilot_b)
    if a.size < 2 or b.size < 2:
        raise ValueError("power needs at least 2 pilot values per condition")
    if paired and a.size != b.size:
        raise ValueError("paired pilots must have one value per seed in both conditions")
    rng = np.random.default_rng(seed)
    return [
        (
            int(n),
            _detect_rate(
                a,
                b,
                effect,
                int(n),
                paired=paired,
                n_sim=n_sim,
                n_resamples=n_resamples,
                level=level,
                rng=rng,
            ),
        )
        for n in seeds
        if n >= 2
    ]


def seeds_for_power(
    pilot: object,
    effect: float,
    *,
    power: float = 0.8,
    pilot_b: object = None,
    paired: bool = False,
    max_seeds: int = 256,
    n_sim: int = 200,
    n_resamples: int = 400,
    level: float = 0.95,
    seed: int = 0,
) -> int | None:
    """Smallest number of seeds per condition at which a study detects `effect` with at
    least `power` (simulation from the pilot's per-seed values; see `power_curve`, whose
    parameters these are). Doubles from 2 seeds, then bisects. None when even `max_seeds`
    seeds fall short (the effect is too small for the pilot's spread)."""
    if effect == 0:
        raise ValueError("effect must be non-zero: a zero difference is never 'detected'")

    def ok(n: int) -> bool:
        (_, p), *_ = power_curve(
            pilot,
            effect,
            [n],
            pilot_b=pilot_b,
            paired=paired,
            n_sim=n_sim,
            n_resamples=n_resamples,
            level=level,
            seed=seed,
        )
        return p >= power

    lo, hi = 1, 2
    while not ok(hi):
        if hi >= max_seeds:
            return None
        lo, hi = hi, min(2 * hi, max_seeds)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


PILOT_SEEDS = 5  # a pilot of fewer seeds gives a spread too uncertain to plan on without a caveat


def power_sentence(
    measure: str, needed: int | None, effect: float, pilot_seeds: int, baseline: str
) -> str:
    """The line a report prints for `seeds_for_power`'s answer, with its caveat in the same
    line when the pilot had fewer than `PILOT_SEEDS` seeds (a reviewer read "177 seeds ...
    (pilot: 2 seeds)" printed as if it were a plan)."""
    line = (
        f"{measure}: {needed or 'more than 256'} seeds per condition detect a difference of "
        f"{effect} with 80 % power (pilot: {pilot_seeds} seeds of {baseline})"
    )
    if pilot_seeds < PILOT_SEEDS:
        line += (
            f" — a rough guide only: the spread of {pilot_seeds} seeds is itself uncertain "
            f"(run at least {PILOT_SEEDS} pilot seeds to plan on it)"
        )
    return line

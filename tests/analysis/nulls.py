"""The null test of the synthetic runs, in one place: both "conditions" drawn from one pool of
runs made with the same knobs, so the true difference is 0."""

from __future__ import annotations

import numpy as np

from mbb.analysis import diff_bootstrap_ci


def pool_null_coverage(
    pool: np.ndarray, *, per_side: int = 20, draws: int = 200, seed: int = 7
) -> int:
    """Of `draws` random splits of `per_side` vs `per_side` runs from `pool` (per-run values),
    how many give a bootstrap CI of the difference in means that includes 0.

    pool: one value per run of the null pool; per_side: runs in each arm of a draw; draws: how
    many draws; seed: the draws' random stream (each draw's bootstrap is seeded by its index)."""
    assert pool.size >= 2 * per_side
    rng = np.random.default_rng(seed)
    covered = 0
    for rep in range(draws):
        pick = rng.permutation(pool.size)[: 2 * per_side]
        ci = diff_bootstrap_ci(
            pool[pick[:per_side]], pool[pick[per_side:]], n_resamples=500, seed=rep
        )
        assert ci is not None
        covered += ci[0] <= 0 <= ci[1]
    return covered

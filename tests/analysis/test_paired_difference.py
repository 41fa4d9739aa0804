"""paired_seed_difference: counts subtract as numbers, and a table with several rows per seed
is refused rather than cross-joined."""

import polars as pl
import pytest

from mbb.analysis import paired_seed_difference


def _per_seed(values: list[int], kind: str = "rule") -> pl.DataFrame:
    return pl.DataFrame(
        {"seed": list(range(len(values))), "kind": [kind] * len(values), "n": values},
        schema={"seed": pl.Int64, "kind": pl.String, "n": pl.UInt32},
    )


def test_unsigned_counts_give_a_negative_difference():
    out = paired_seed_difference(_per_seed([1, 2, 1, 0]), _per_seed([3, 4, 3, 2]), "n")
    row = out.row(0, named=True)
    assert row["n"] == 4 and row["difference"] == pytest.approx(-2.0)
    assert row["ci_high"] < 0


def test_several_rows_per_seed_need_by():
    two_kinds = pl.concat([_per_seed([1, 2, 3]), _per_seed([0, 0, 0], "debt")])
    with pytest.raises(ValueError, match="several rows per"):
        paired_seed_difference(two_kinds, two_kinds, "n")
    out = paired_seed_difference(two_kinds, two_kinds, "n", by=["kind"])
    assert out["n"].to_list() == [3, 3] and out["difference"].to_list() == [0.0, 0.0]

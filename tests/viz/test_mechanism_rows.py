"""A condition that imposes a mechanism (mech_fcfs) was replayed under the other mechanisms but
has no negotiated run: its facet row in the per-worker and waiting charts must list only its own
mechanisms, not an empty band for "negotiated" borrowed from the other conditions."""

from __future__ import annotations

import polars as pl
import pytest

from mbb.viz import mechanisms as M

_MECHS = {"base": ("negotiated", "fcfs", "edf"), "mech_fcfs": ("fcfs", "edf")}


def _execution() -> pl.DataFrame:
    rows = [
        dict(run_id=f"{c}{i}~{m}", worker=w, exec_s=100.0 + i, windows=3, mechanism=m,
             base_run=f"{c}{i}", condition=c)
        for c, mechs in _MECHS.items() for i in range(3) for m in mechs for w in ("W1", "W2")
    ]  # fmt: skip
    return pl.DataFrame(rows)


def _waits() -> pl.DataFrame:
    rows = [
        dict(condition=c, mechanism=m, wait_s=float(10 * i))
        for c, mechs in _MECHS.items() for m in mechs for i in range(5)
    ]  # fmt: skip
    return pl.DataFrame(rows)


@pytest.mark.parametrize(
    "chart",
    [lambda: M.execution_by_worker(_execution()), lambda: M.waiting_distribution(_waits())],
    ids=["execution_by_worker", "waiting_distribution"],
)
def test_each_condition_row_has_only_its_mechanisms(chart):
    spec = chart().to_dict()
    assert spec["resolve"]["scale"]["y"] == "independent"

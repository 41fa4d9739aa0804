"""Screens flag a synthetic bid-rotation ring and leave independent price bidders alone."""

from __future__ import annotations

import pytest
from conftest import small
from ring import install_ring

from mbb.analysis.mechanisms.screens import rotation_stat, screens
from mbb.batch.build import run_condition
from mbb.core.tables import concat_tables, tables_from_log

SEEDS = range(6)


def _screened(cond):
    return screens(concat_tables([tables_from_log(run_condition(cond, s).log) for s in SEEDS]))


def test_ring_is_flagged(monkeypatch):
    install_ring(monkeypatch, ["W1", "W2", "W3", "W4"])
    s = _screened(small(subruns=8, name="ring"))
    assert s["flagged"].all(), s.select("run_id", "evidence").to_dicts()
    assert (s["cv_drop"] >= 0.5).all()
    assert (s["private_share"] >= 0.5).all()
    assert (s["rule_agreed_at"] == "1.1").all()
    assert any("rotation" in e for ev in s["evidence"] for e in ev)


def test_independent_price_bidders_are_not_flagged():
    s = _screened(small(subruns=8, name="price", workers={"personas": ["price_first"]}))
    assert not s["flagged"].any(), s.select("run_id", "evidence").to_dicts()
    assert (s["private_share"] == 0).all()
    assert s["cv_drop"].null_count() == s.height  # no rule was ever agreed


def test_rotation_stat_perfect_ring_vs_constant_winner():
    cands = ["A", "B", "C"]
    ring = [(cands, w) for w in "ABCABCABCABC"]
    share, p, scored = rotation_stat(ring)
    assert share == 1.0 and scored == 12 and p < 1e-3
    share, p, _ = rotation_stat([(cands, "A")] * 12)
    assert p == 1.0  # one winner: nothing to rotate
    assert rotation_stat([]) == (0.0, 1.0, 0)


def test_empty_tables_give_an_empty_frame():
    from mbb.core.tables import tables_from_lines

    assert screens(tables_from_lines({})).height == 0


@pytest.mark.parametrize("persona", ["reciprocator", "coalition_builder"])
def test_screens_report_evidence_strings(persona):
    alternating = [persona, "price_first", persona, "price_first", persona]  # W1..W5
    s = _screened(small(name=persona, workers={"personas": alternating}))
    assert s.height == len(SEEDS)
    assert all(len(ev) == n for ev, n in zip(s["evidence"], s["screens_tripped"], strict=True))


def test_a_run_without_bids_has_no_screen_statistics():
    """A centralized run declares no bid: its screen statistics are n/a, not the 0 (and p = 1)
    of a screen over nothing, which read as "no rotation, no cover bids"; a negotiated run
    beside it keeps its values."""
    from mbb.analysis.mechanisms.screens import _READ_FROM_BIDS

    runs = [run_condition(small(kind, name=kind), 0).log for kind in ("fcfs", "negotiated")]
    s = screens(concat_tables([tables_from_log(log) for log in runs]))
    fcfs = s.filter(s["run_id"].str.starts_with("fcfs")).row(0, named=True)
    negotiated = s.filter(s["run_id"].str.starts_with("negotiated")).row(0, named=True)
    assert all(fcfs[c] is None for c in _READ_FROM_BIDS), fcfs
    assert fcfs["contested_rounds"] == 0 and not fcfs["flagged"]
    assert negotiated["rotation"] is not None and negotiated["cover_share"] is not None

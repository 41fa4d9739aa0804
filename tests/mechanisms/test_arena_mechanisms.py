"""The arena under each centralized mechanism: same events, rule labels, payments, invariants."""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import small

from mbb.batch.build import load_params, run_condition
from mbb.core.events import parse_events
from mbb.core.tables import tables_from_log
from mbb.params import ParamsError
from mbb.protocol.scheduling.centralized import AUCTIONS, CENTRALIZED, CENTRALIZED_MECHANISMS


@pytest.mark.parametrize("kind", CENTRALIZED)
def test_every_mechanism_runs_and_publishes_its_rule(kind):
    r = run_condition(small(kind), 3)
    parse_events(r.log.lines)  # every event validates against the schema
    t = tables_from_log(r.log)
    assert set(t["rounds"]["rule"]) == {kind}
    assert t["rounds"].height >= 2
    assert not r.log.by_kind.get("ballot") and not r.log.by_kind.get("message")
    declared = bool(r.log.by_kind.get("declared"))
    asks_bids = CENTRALIZED_MECHANISMS[kind].asks_bids
    assert declared == asks_bids
    paid = t["payments"]
    if asks_bids:
        assert paid.height > 0 and set(paid["rule"]) == {kind}
    else:
        assert paid.height == 0
        assert t["windows"].filter(pl.col("status") == "ran")["price"].sum() == 0
    assert t["evaluations"].height == 2 * 5


@pytest.mark.parametrize("kind", AUCTIONS)
def test_auctions_sell_one_window_per_round(kind):
    r = run_condition(small(kind), 1)
    t = tables_from_log(r.log)
    assert (t["rounds"]["order"].list.len() == 1).all()
    ran = t["windows"].filter(pl.col("status") == "ran")
    final = t["declarations"].sort("seq").group_by("subrun", "round", "worker").last()
    joined = ran.join(final, on=["subrun", "round", "worker"])
    assert (joined["price"] <= joined["bid"]).all()
    if kind == "first_price":
        assert (joined["price"] == joined["bid"]).all()
    else:  # Vickrey: the highest losing bid of that round
        for row in joined.iter_rows(named=True):
            others = final.filter(
                (pl.col("subrun") == row["subrun"])
                & (pl.col("round") == row["round"])
                & (pl.col("worker") != row["worker"])
            )["bid"]
            assert row["price"] == (others.max() if others.len() else 0)


def test_edf_uses_the_true_private_deadlines():
    cond = small("edf", workers={"overrides": {"W5": {"deadline_min": 8}}})
    t = tables_from_log(run_condition(cond, 0).log)
    first = t["rounds"].sort("subrun", "round").group_by("subrun").first()
    assert (first["order"].list.first() == "W5").all()


def test_fcfs_first_round_is_queue_order():
    t = tables_from_log(run_condition(small("fcfs"), 0).log)
    r = t["rounds"].filter(pl.col("round") == 1)
    assert (r["order"] == r["candidates"]).all()


def test_round_robin_quantum_bounds_every_window():
    t = tables_from_log(
        run_condition(
            small("round_robin", mechanism={"kind": "round_robin", "quantum_s": 45}), 2
        ).log
    )
    assert t["windows"]["allocation"].max() <= 45


def test_same_seed_same_events():
    a = run_condition(small("sjf"), 4).log.lines
    b = run_condition(small("sjf"), 4).log.lines
    strip = [{k: v for k, v in json.loads(x).items() if k not in ("wall", "provenance")} for x in a]
    assert strip == [
        {k: v for k, v in json.loads(x).items() if k not in ("wall", "provenance")} for x in b
    ]


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(ParamsError, match=r"mechanism.kind: .*'lottery'"):
        load_params({"mechanism": {"kind": "lottery"}})

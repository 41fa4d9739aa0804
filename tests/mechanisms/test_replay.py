"""Counterfactual replay: exact under the original mechanism; same demand under any other."""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import small

from mbb.analysis.mechanisms.replay import ReplayError, recorded_demand, replay
from mbb.batch.build import run_condition
from mbb.core.tables import tables_from_log
from mbb.protocol.scheduling.centralized import CENTRALIZED

WINDOW_COLS = [
    "subrun",
    "round",
    "worker",
    "position",
    "status",
    "start",
    "used",
    "allocation",
    "reason",
    "progress",
    "price",
]


def _windows(result) -> pl.DataFrame:
    return tables_from_log(result.log)["windows"].select(WINDOW_COLS)


@pytest.mark.parametrize("kind", CENTRALIZED)
@pytest.mark.parametrize("seed", [0, 7])
def test_replay_under_the_original_mechanism_reproduces_the_schedule(kind, seed):
    original = run_condition(small(kind), seed)
    again = replay(original.log.lines, kind)
    assert again.run_id == f"{original.run_id}~{kind}"
    assert _windows(again).equals(_windows(original))
    a, b = tables_from_log(original.log), tables_from_log(again.log)
    assert (
        a["rounds"]
        .select("subrun", "round", "order", "allocations", "bids")
        .equals(b["rounds"].select("subrun", "round", "order", "allocations", "bids"))
    )
    assert a["evaluations"].drop("run_id", "seq").equals(b["evaluations"].drop("run_id", "seq"))


def test_replay_with_quitters_and_withdrawals_in_auctions():
    alternating = ["quitter", "price_first", "quitter", "price_first", "quitter"]  # W1..W5
    cond = small("first_price", workers={"personas": alternating}, deadline={"minutes": 8})
    original = run_condition(cond, 2)
    assert original.log.by_kind.get("withdrawn")
    assert _windows(replay(original.log.lines, "first_price")).equals(_windows(original))


def test_replay_of_a_negotiated_run_keeps_its_demand(tmp_path):
    original = run_condition(small(), 5, tmp_path)
    demand = recorded_demand(tmp_path / original.run_id / "events.jsonl")
    assert demand.seed == 5 and set(demand.tasks) == {1, 2}
    assert demand.bids  # the declarations of the negotiated rounds
    for kind in CENTRALIZED:
        r = replay(demand, kind, tmp_path / "replays")
        assert (tmp_path / "replays" / r.run_id / "events.jsonl").is_file()
        a = tables_from_log(original.log)["subrun_workers"].select(
            "subrun", "worker", "task", "work_s", "deadline_s"
        )
        b = tables_from_log(r.log)["subrun_workers"].select(
            "subrun", "worker", "task", "work_s", "deadline_s"
        )
        assert a.equals(b)
        assert set(tables_from_log(r.log)["rounds"]["rule"]) == {kind}


def test_replay_refuses_non_modeled_solvers():
    lines = run_condition(small("fcfs"), 0).log.lines
    first = json.loads(lines[0])
    first["workers"][0]["solver"] = "llm"
    with pytest.raises(ReplayError, match="only modeled solvers can be replayed exactly"):
        recorded_demand([json.dumps(first), *lines[1:]])
    with pytest.raises(ReplayError, match="no run_started event"):
        recorded_demand(lines[1:])

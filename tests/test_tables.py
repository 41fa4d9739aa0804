from __future__ import annotations

import json

import polars as pl

from mbb.analysis.outcome import outcomes
from mbb.core.eventlog import read_lines
from mbb.core.tables import TABLES, load_tables, tables_from_run_dirs


def test_tables_written_for_every_name(base_batch):
    tdir = base_batch.out_dir / "tables"
    assert sorted(p.stem for p in tdir.glob("*.parquet")) == sorted(TABLES)
    loaded = load_tables(tdir)
    for name in TABLES:
        assert loaded[name].equals(base_batch.tables[name]), name


def test_tables_match_event_counts(base_batch):
    kinds: dict[str, int] = {}
    for d in base_batch.run_dirs:
        for line in read_lines(d / "events.jsonl"):
            k = json.loads(line)["kind"]
            kinds[k] = kinds.get(k, 0) + 1
    t = base_batch.tables
    assert t["declarations"].height == kinds["declared"]
    assert t["messages"].height == kinds.get("message", 0)
    assert t["ballots"].height == kinds["ballot"]
    assert t["rounds"].height == kinds["schedule_published"]
    assert t["payments"].height == kinds["payment"]
    assert t["evaluations"].height == kinds["evaluation"] == 3 * 5 * 4
    ran = t["windows"].filter(pl.col("status") == "ran").height
    assert ran == kinds["window_ended"]
    assert t["windows"].height == kinds["window_ended"] + kinds.get("window_dropped", 0)


def test_rebuilding_from_disk_equals_in_memory(base_batch):
    again = tables_from_run_dirs(base_batch.run_dirs)
    for name in TABLES:
        a = again[name].sort(pl.all())
        b = base_batch.tables[name].sort(pl.all())
        assert a.equals(b), name


def test_window_prices_equal_payments(base_batch):
    w = base_batch.tables["windows"].filter(pl.col("status") == "ran")
    p = base_batch.tables["payments"]
    assert w["price"].sum() == p["amount"].sum()


def test_outcomes_per_subrun_shape(base_batch):
    s = outcomes(base_batch.tables, "subrun")
    assert s["subrun"].to_list() == [1, 2, 3, 4]
    assert (s["worker_subruns"] == 15).all()
    rates = s["completion"] + s["deadline_miss"]
    assert (rates <= 1.0 + 1e-9).all()

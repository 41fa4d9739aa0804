"""The one outcome summary (`mbb.analysis.outcome.outcomes`): the numbers of the summaries it
replaced, recomputed here row by row in plain Python on real runs, for every grouping."""

from __future__ import annotations

from collections import defaultdict
from statistics import mean

import polars as pl
import pytest

from mbb.analysis.outcome import OUTCOME_COLUMNS, gini, outcomes, waits
from mbb.batch.build import load_params
from mbb.batch.runner import run_many
from mbb.core.tables import concat_tables


@pytest.fixture(scope="module")
def two_conditions(base_batch) -> dict[str, pl.DataFrame]:
    """base (3 runs) beside mech_sjf (2 runs: no bids, no messages), with `condition`."""
    sjf = run_many(load_params("params/mech_sjf.yaml"), runs=2, out_dir=None, write=False)
    parts = [
        {k: v.with_columns(pl.lit(name).alias("condition")) for k, v in b.tables.items()}
        for name, b in (("base", base_batch), ("mech_sjf", sjf.check()))
    ]
    return concat_tables(parts)


def _rows(df: pl.DataFrame) -> list[dict]:
    return df.to_dicts()


def _by(rows: list[dict], key) -> dict:
    out: dict = defaultdict(list)
    for r in rows:
        out[key(r)].append(r)
    return out


def test_per_subrun_numbers_are_the_old_outcome_summary(base_batch):
    """tables.outcome_summary: rates over evaluations, mean of every declared bid, credits
    and rounds per run, per subrun."""
    t = base_batch.tables
    got = {r["subrun"]: r for r in _rows(outcomes(t, "subrun"))}
    evals = _by(_rows(t["evaluations"]), lambda r: r["subrun"])
    bids = _by(_rows(t["declarations"]), lambda r: r["subrun"])
    paid = _by(_rows(t["payments"]), lambda r: r["subrun"])
    rounds = _by(_rows(t["rounds"]), lambda r: r["subrun"])
    assert sorted(got) == sorted(evals) == [1, 2, 3, 4]
    for s, ev in evals.items():
        runs = len({r["run_id"] for r in ev})
        g = got[s]
        assert g["worker_subruns"] == len(ev)
        assert g["completion"] == pytest.approx(mean(r["outcome"] == "completed" for r in ev))
        assert g["deadline_miss"] == pytest.approx(mean(r["outcome"] == "terminated" for r in ev))
        assert g["progress"] == pytest.approx(mean(r["progress"] for r in ev))
        assert g["score"] == pytest.approx(mean(r["score"] for r in ev))
        assert g["mean_bid"] == pytest.approx(mean(r["bid"] for r in bids[s]))
        assert g["credits_per_run"] == pytest.approx(sum(r["amount"] for r in paid[s]) / runs)
        assert g["rounds_per_subrun"] == pytest.approx(len(rounds[s]) / runs)


def test_per_condition_numbers_are_the_old_condition_table(two_conditions):
    """compare.condition_table: runs, rates, bids, credits and private messages per run; a
    condition without payments says 0 (it said null); one without any message n/a, with why."""
    t = two_conditions
    got = {r["condition"]: r for r in _rows(outcomes(t, "condition"))}
    assert set(got) == {"base", "mech_sjf"}
    for cond, g in got.items():
        ev = [r for r in _rows(t["evaluations"]) if r["condition"] == cond]
        runs = len({r["run_id"] for r in ev})
        msgs = [r for r in _rows(t["messages"]) if r["condition"] == cond and r["to"]]
        paid = [r["amount"] for r in _rows(t["payments"]) if r["condition"] == cond]
        bids = [r["bid"] for r in _rows(t["declarations"]) if r["condition"] == cond]
        subruns = {(r["run_id"], r["subrun"]) for r in ev}
        n_rounds = sum(1 for r in _rows(t["rounds"]) if r["condition"] == cond)
        assert g["runs"] == runs
        assert g["completion"] == pytest.approx(mean(r["outcome"] == "completed" for r in ev))
        if any(r["condition"] == cond for r in _rows(t["messages"])):
            assert g["private_msgs_per_run"] == pytest.approx(len(msgs) / runs)
        else:  # no message at all (a centralized mechanism): n/a, not 0 (M2)
            assert g["private_msgs_per_run"] is None and g["private_msgs_per_run_why"]
        assert g["credits_per_run"] == pytest.approx(sum(paid) / runs)
        assert g["mean_bid"] == (pytest.approx(mean(bids)) if bids else None)
        assert g["rounds_per_subrun"] == pytest.approx(n_rounds / len(subruns))
    assert got["mech_sjf"]["private_msgs_per_run"] is None  # no message at all: n/a (M2)


def test_per_run_numbers_are_the_old_mechanism_outcomes(two_conditions):
    """mechanisms.outcomes: waits, lateness and the Gini of execution seconds per run."""
    t = two_conditions
    got = {r["run_id"]: r for r in _rows(outcomes(t, ["run_id", "mechanism"]))}
    assert {r["mechanism"] for r in got.values()} == {"negotiated", "sjf"}
    w = _by(_rows(waits(t)), lambda r: r["run_id"])
    ran = [r for r in _rows(t["windows"]) if r["status"] == "ran"]
    for rid, g in got.items():
        exec_s: dict[str, float] = defaultdict(float)
        for r in _rows(t["subrun_workers"]):
            if r["run_id"] == rid:
                exec_s[r["worker"]] += 0.0
        for r in ran:
            if r["run_id"] == rid:
                exec_s[r["worker"]] += r["used"]
        assert g["gini_exec"] == pytest.approx(gini(exec_s.values()))
        assert g["mean_wait_s"] == pytest.approx(mean(r["wait_s"] for r in w[rid]))
        assert g["max_wait_s"] == pytest.approx(max(r["wait_s"] for r in w[rid]))
        sw = {
            (r["subrun"], r["worker"]): r for r in _rows(t["subrun_workers"]) if r["run_id"] == rid
        }
        done = {
            (r["subrun"], r["worker"]): r["end"]
            for r in ran
            if r["run_id"] == rid and r["reason"] == "completed"
        }
        late = [
            done[k] - sw[k]["deadline_s"] if k in done else (1 - e["progress"]) * sw[k]["work_s"]
            for e in _rows(t["evaluations"])
            if e["run_id"] == rid and (k := (e["subrun"], e["worker"]))
        ]
        assert g["max_lateness_s"] == pytest.approx(max(late))


def test_every_grouping_has_the_same_columns_and_adds_up(two_conditions):
    t = two_conditions
    total_paid = t["payments"]["amount"].sum()
    for by in (["run_id"], ["condition"], ["subrun"], ["worker"], ["condition", "worker", "task"]):
        out = outcomes(t, by)
        assert out.columns == [*by, *OUTCOME_COLUMNS], by
        assert out["worker_subruns"].sum() == t["evaluations"].height, by
        assert (out["credits_per_run"] * out["runs"]).sum() == pytest.approx(total_paid), by
    per_worker = outcomes(t, ["run_id", "worker"])
    assert per_worker["gini_exec"].null_count() == per_worker.height  # one worker: no spread


def test_attributes_and_bad_keys(two_conditions):
    t = two_conditions
    seeds = (
        t["evaluations"]
        .select("run_id")
        .unique()
        .with_columns((pl.col("run_id").str.slice(-1).cast(pl.Int64) % 2).alias("parity"))
    )
    out = outcomes(t, "parity", attributes=[seeds])
    assert out["runs"].sum() == t["evaluations"]["run_id"].n_unique()
    with pytest.raises(ValueError, match="cannot group outcomes by 'seed'"):
        outcomes(t, "seed")
    with pytest.raises(ValueError, match="needs a run_id column"):
        outcomes(t, "parity", attributes=[seeds.drop("run_id")])
    with pytest.raises(ValueError, match="at least one grouping key"):
        outcomes(t, [])


def test_a_grouping_key_wins_over_an_event_column_of_the_same_name(base_batch):
    """Grouping LLM cost by the run's model must not regroup calls by each call's own model."""
    t = dict(base_batch.tables)
    runs = t["evaluations"]["run_id"].unique().sort().to_list()
    calls = pl.DataFrame(
        {
            "run_id": [runs[0], runs[0], runs[1]],
            "subrun": [1, 1, 1],
            "worker": ["W1", "W2", "W1"],
            "model": ["small", "large", "small"],
            "cost_usd": [1.0, 2.0, 4.0],
        }
    )
    t["llm_calls"] = calls
    run_model = pl.DataFrame(
        {"run_id": runs, "model": ["small+large"] + ["small"] * (len(runs) - 1)}
    )
    got = {r["model"]: r for r in outcomes(t, "model", attributes=[run_model]).to_dicts()}
    assert got["small+large"]["cost_per_run_usd"] == pytest.approx(3.0)
    assert got["small"]["cost_per_run_usd"] == pytest.approx(4.0 / (len(runs) - 1))

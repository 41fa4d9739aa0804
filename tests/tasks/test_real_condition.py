"""A whole condition on real tasks: scripted negotiation, real windows on the sandboxed
resource, oracle solvers writing and compiling their reconstructions, real evaluation."""

from __future__ import annotations

import json

import polars as pl

from mbb.batch.build import load_params, run_condition
from mbb.core.tables import tables_from_log


def test_oracle_condition_runs_end_to_end_with_real_scores(root, tmp_path):
    cond = load_params(
        root / "params" / "real_tasks_oracle.yaml",
        # the paper's fixed rotation, so the tasks below are known without the workload design
        {"workers": {"count": 3}, "subruns": 2, "tasks": {"assignment": "rotate"}},
    )
    result = run_condition(cond, 0, tmp_path)
    t = tables_from_log(result.log)
    ev = t["evaluations"]
    assert ev.height == 6
    assert set(ev["task"]) == {"rev", "tac", "head", "tail", "expand", "base64"}
    assert (ev["score"] == 1.0).all() and (ev["total"] >= 30).all()
    assert (ev["outcome"] == "completed").all()
    kinds = {line[9 : line.index('"', 9)] for line in result.log.lines}
    assert {"command", "test_result", "schedule_published", "payment"} <= kinds
    # every command of a round ran inside its worker's window (the evaluator's own commands
    # run after the subrun, outside any round, and are not charged to a window)
    cmds = [json.loads(x) for x in result.log.by_kind["command"]]
    cmds = [c for c in cmds if c["round"] is not None]
    assert len(cmds) >= 6 * 5
    wins = t["windows"].filter(pl.col("status") == "ran")
    for c in cmds:
        w = wins.filter(
            (pl.col("worker") == c["worker"])
            & (pl.col("subrun") == c["subrun"])
            & (pl.col("start") <= c["t"] + 1e-9)
            & (pl.col("end") >= c["t"] - 1e-9)
        )
        assert w.height == 1, c
        assert not c["refused"]
    assert (tmp_path / result.run_id / "resource" / "workspaces" / "W1").is_dir()

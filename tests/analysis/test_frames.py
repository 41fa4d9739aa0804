"""Run and worker information from run_started events; LLM workers' model labels and the
prompt's price-primary mandate."""

from __future__ import annotations

import json

import polars as pl
import pytest

from mbb.analysis import institutions, run_info, run_info_from_dirs, with_run_info


def _started(run_id: str, negotiator: str, model: str | None) -> str:
    return json.dumps(
        {
            "kind": "run_started",
            "v": 1,
            "run_id": run_id,
            "seq": 0,
            "t": 0.0,
            "subrun": None,
            "round": None,
            "worker": None,
            "wall": 0.0,
            "condition": "fixed_bids",
            "seed": 7,
            "params": {
                "subruns": 3,
                "memory": {"enabled": False},
                "negotiation": {"bids": "fixed"},
            },
            "workers": [
                {
                    "id": "W1",
                    "index": 0,
                    "persona": "price_first",
                    "negotiator": negotiator,
                    "solver": "modeled",
                    "model": model,
                    "budget": 900,
                    "deadline_s": 60.0,
                }
            ],
            "provenance": {},
        }
    )


def test_run_info_labels_llm_workers_by_model():
    runs, workers = run_info([_started("r1", "llm", "glm-5.3"), _started("r2", "scripted", None)])
    assert runs.rows() == [
        ("r1", "fixed_bids", 7, False, "fixed", 3, []),
        ("r2", "fixed_bids", 7, False, "fixed", 3, []),
    ]
    assert workers.select("run_id", "label", "budget").rows() == [
        ("r1", "glm-5.3", 900),
        ("r2", "price_first", 900),
    ]


def test_run_info_from_dirs_reads_the_first_line(tmp_path):
    d = tmp_path / "r1"
    d.mkdir()
    (d / "events.jsonl").write_text(_started("r1", "llm", None) + '\n{"kind":"x"}\n')
    runs, workers = run_info_from_dirs([d])
    assert runs["run_id"].to_list() == ["r1"] and workers["label"].to_list() == ["llm"]
    with pytest.raises(ValueError, match="needs by_kind"):
        with_run_info({})


def _labels(run_id: str = "r1") -> pl.DataFrame:
    wr = pl.DataFrame(
        {
            "run_id": [run_id] * 4,
            "subrun": [1, 1, 2, 2],
            "round": [1, 2, 1, 1],
            "worker": ["W1"] * 4,
            "category": ["price_primary", "price_primary", "anchoring", "shortest_job_first"],
        }
    )
    return pl.concat([wr, wr.with_columns(pl.lit(3, pl.Int64).alias("round"))])


def test_mandates_of_llm_workers_are_what_the_rules_impose():
    """An LLM worker under Kemeny ballots is told no ordering to use: its price-primary and SJF
    talk is its own. Under a price-ordered aggregation price-primary is the rule (mandated);
    under an SJF mechanism shortest-job-first is."""
    runs, workers = run_info([_started("r1", "llm", "glm-5.3")])
    inst = institutions({"workers": workers, "runs": runs}, _labels()).select(
        "category", "mandated", "forward_scoped", "institutional"
    )
    # anchoring and price-primary are unmarked; SJF (non-relational) is self-discovered, but
    # with no text to show it is scoped to future rounds, not an institution
    assert inst.rows() == [
        ("anchoring", False, False, False),
        ("price_primary", False, False, False),
        ("shortest_job_first", False, False, False),
    ]
    for params, mandated in (
        ({"mechanism": {"aggregation": "price_only"}}, {"price_primary"}),
        ({"mechanism": {"kind": "sjf"}}, {"shortest_job_first"}),
    ):
        line = json.loads(_started("r2", "llm", "glm-5.3"))
        line["params"].update(params)
        runs2, workers2 = run_info([json.dumps(line)])
        assert set(runs2["imposed"][0]) == mandated
        got = institutions({"workers": workers2, "runs": runs2}, _labels("r2"))
        assert set(got.filter("mandated")["category"]) == mandated

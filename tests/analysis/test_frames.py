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
        ("r1", "fixed_bids", 7, False, "fixed", 3),
        ("r2", "fixed_bids", 7, False, "fixed", 3),
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


def test_prompt_mandates_price_primary_for_llm_workers():
    _, workers = run_info([_started("r1", "llm", "glm-5.3")])
    wr = pl.DataFrame(
        {
            "run_id": ["r1"] * 4,
            "subrun": [1, 1, 2, 2],
            "round": [1, 2, 1, 1],
            "worker": ["W1"] * 4,
            "category": ["price_primary", "price_primary", "anchoring", "shortest_job_first"],
        }
    )
    wr = pl.concat([wr, wr.with_columns(pl.lit(3, pl.Int64).alias("round"))])
    inst = institutions({"workers": workers}, wr).select(
        "category", "mandated", "forward_scoped", "institutional"
    )
    # anchoring is unmarked; SJF (non-relational) is not suggested by the LLM prompt, so
    # self-discovered, but with no text to show it is scoped to future rounds, not an
    # institution
    assert inst.rows() == [
        ("anchoring", False, False, False),
        ("price_primary", True, False, False),
        ("shortest_job_first", False, False, False),
    ]

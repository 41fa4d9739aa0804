"""The drift charts of the taxonomy audit carry units on their axes (they read 'Share /
similarity (0-1)' over snake_case panel names, and 'Share of worker-rounds')."""

from __future__ import annotations

from typing import Any

import polars as pl
from helpers import spec_values

from mbb.viz import taxonomy as T


def _titles(spec: Any) -> set[str]:
    return {t if isinstance(t, str) else t.get("text", "") for t in spec_values(spec, "title")}


def test_linguistic_drift_axes_carry_units():
    ling = pl.DataFrame(
        {
            "condition": ["base"] * 2,
            "model": ["m"] * 2,
            "subrun": [1, 2],
            "workers": [5, 5],
            "new_vocab_share": [0.4, 0.05],
            "bow_similarity": [None, 0.9],
            "trigram_similarity": [None, 0.6],
            "institutional_share": [0.5, 0.5],
        }
    )
    titles = _titles(T.linguistic_drift_chart(ling).to_dict())
    for unit in ("% of word types", "% of utterances", "cosine, 0-1", "Jaccard, 0-1"):
        assert unit in titles, (unit, titles)
    assert not any("_" in t for t in titles), titles


def test_behaviour_drift_axis_says_percent():
    drift = pl.DataFrame(
        {
            "condition": ["base"] * 2,
            "model": ["m"] * 2,
            "group": ["relational"] * 2,
            "subrun": [1, 2],
            "prevalence": [0.2, 0.3],
            "worker_rounds": [10, 10],
        }
    )
    tests = pl.DataFrame(
        {
            "condition": ["base"],
            "model": ["m"],
            "group": ["relational"],
            "chi2": [0.5],
            "dof": [1],
            "p_value": [0.5],
            "delta": [0.1],
        }
    )
    titles = _titles(T.behaviour_drift_chart(drift, tests).to_dict())
    assert "Worker-rounds showing the group (%)" in titles

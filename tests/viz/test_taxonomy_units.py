"""The drift charts of the taxonomy audit carry units on their axes (they read 'Share /
similarity (0-1)' over snake_case panel names, and 'Share of worker-rounds')."""

from __future__ import annotations

from typing import Any

import polars as pl
from helpers import spec_values

from mbb.viz import taxonomy as T


def _titles(spec: Any) -> set[str]:
    return {
        line
        for t in spec_values(spec, "title")
        if t is not None
        for line in ([t] if isinstance(t, str) else [t.get("text", ""), *(t.get("subtitle") or [])])
    }


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
    spec = T.behaviour_drift_chart(drift, tests).to_dict()
    # said once, in the subtitle: a y title per row of panels overprinted its neighbours (M6)
    assert any("worker-rounds showing the group (%)" in t for t in _titles(spec))
    assert not any("Worker-rounds" in str(e.get("title")) for e in spec_values(spec, "y") if e), (
        "a y title per row of panels"
    )


def test_linguistic_drift_legend_draws_each_conditions_dash_and_fits_a_page():
    """Conditions are told apart only by their line's dash: the legend drew each as the same
    black circle, and the four panels side by side were ~1,280 px wide."""
    import struct

    import vl_convert as vlc

    conditions = ["base", "conversation_off", "memory_off", "rich_worker", "rule_makers",
                  "rule_makers_memory_off", "urgent_worker"]  # fmt: skip
    rows = [
        dict(
            condition=c,
            model=m,
            subrun=s,
            workers=5,
            new_vocab_share=0.3 / s,
            bow_similarity=0.9,
            trigram_similarity=0.6,
            institutional_share=0.5,
        )
        for c in conditions
        for m in ("price_first", "reciprocator", "shortest_job_advocate")
        for s in (1, 2, 3, 4)
    ]
    chart = T.linguistic_drift_chart(pl.DataFrame(rows))
    vega = vlc.vegalite_to_vega(chart.to_json())
    (legend,) = [g for g in vega["legends"] if "strokeDash" in g]
    assert legend["symbolType"] == "stroke", legend
    symbols = legend.get("encode", {}).get("symbols", {}).get("update", {})
    assert symbols.get("stroke", {}).get("value") != "transparent", legend
    dashes = next(s for s in vega["scales"] if s["name"] == "strokeDash")["range"]
    assert len({tuple(d) for d in dashes}) == len(conditions)  # one dash each
    png = vlc.vegalite_to_png(chart.to_json(), scale=1)
    width = struct.unpack(">II", png[16:24])[0]
    assert width <= 1000, width

"""The compare-conditions forest plot fits a page: one panel a measure stacked in one column
was 4,345 px tall for the shipped measures against seven conditions (a reviewer's find). Its
panels now sit side by side, and a chart that would still be taller than
`FOREST_MAX_HEIGHT` names the measures it leaves to the table instead of drawing them."""

from __future__ import annotations

import re

import polars as pl

from mbb.analysis.compare import MEASURE_LABELS, OUTCOME_MEASURES
from mbb.analysis.text_measures import TEXT_MEASURES
from mbb.viz import compare as C
from mbb.viz import theme
from mbb.viz.render import legible, render_svg


def _differences(measures: list[str], conditions: int) -> pl.DataFrame:
    """A `condition_table` against `base` with `conditions` other conditions, every difference
    +0.1 [0.05, 0.15] over 8 seeds."""
    rows = [
        {
            "condition": cond,
            "measure": m,
            "n": 8,
            "mean": 0.5,
            "diff": None if cond == "base" else 0.1,
            "diff_ci_low": None if cond == "base" else 0.05,
            "diff_ci_high": None if cond == "base" else 0.15,
            "paired": None if cond == "base" else True,
            "excludes_zero": None if cond == "base" else True,
            "note": "baseline" if cond == "base" else None,
            "baseline": "base",
        }
        for cond in ["base", *(f"condition_{i:02d}" for i in range(conditions))]
        for m in measures
    ]
    return pl.DataFrame(rows)


def _size(chart) -> tuple[float, float]:
    """(width, height) in CSS pixels as a report draws the chart (its SVG, with mbb's fonts)."""
    svg = render_svg(legible(chart.to_dict()))
    w, h = re.search(r'<svg[^>]* width="([\d.]+)" height="([\d.]+)"', svg).groups()
    return float(w), float(h)


def _panel_titles(spec: dict) -> list[str]:
    def text(t):
        t = t.get("text") if isinstance(t, dict) else t
        return " ".join(t) if isinstance(t, list) else t

    return [text(p["title"]) for p in spec["concat"]]


def test_the_shipped_measures_against_seven_conditions_fit_a_page_all_drawn():
    measures = [*OUTCOME_MEASURES, *TEXT_MEASURES]
    chart = C.forest_plot(_differences(measures, 7))
    width, height = _size(chart)
    assert height <= C.FOREST_MAX_HEIGHT and width <= theme.MAX_WIDTH, (width, height)
    assert _panel_titles(chart.to_dict()) == [MEASURE_LABELS[m] for m in measures]


def test_a_taller_chart_names_the_measures_it_leaves_to_the_table():
    # 36 measures against 14 conditions
    measures = [*OUTCOME_MEASURES, *TEXT_MEASURES, *(f"extra_measure_{i}" for i in range(18))]
    chart = C.forest_plot(_differences(measures, 14))
    width, height = _size(chart)
    assert height <= C.FOREST_MAX_HEIGHT and width <= theme.MAX_WIDTH, (width, height)
    spec = chart.to_dict()
    drawn = _panel_titles(spec)
    subtitle = " ".join(spec["title"]["subtitle"])
    assert 0 < len(drawn) < len(measures)
    left = [MEASURE_LABELS.get(m, m) for m in measures[len(drawn) :]]
    assert f"{len(left)} more measure(s), in the table" in subtitle
    assert all(name in subtitle for name in left), subtitle

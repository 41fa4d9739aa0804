"""Measures are read by their names, not their column names: one label map
(`mbb.analysis.compare.MEASURE_LABELS`, the text measures' beside their definitions) feeds the
forest plot and the comparison table, and a measure without a label fails here."""

from __future__ import annotations

import polars as pl
import pytest

from mbb.analysis.compare import MEASURE_LABELS, OUTCOME_MEASURES
from mbb.analysis.text_measures import TEXT_MEASURES
from mbb.viz.compare import _TICKS, forest_plot
from mbb.viz.table import table


def _differences(measures: list[str], diff: float = 0.004, span: float = 0.003) -> pl.DataFrame:
    """A `condition_table` of two conditions against `base` (the columns forest_plot reads)."""
    rows = []
    for cond in ("base", "memory_off"):
        for m in measures:
            d = None if cond == "base" else diff
            rows.append(
                {
                    "condition": cond,
                    "measure": m,
                    "n": 8,
                    "mean": 0.5,
                    "ci_low": 0.4,
                    "ci_high": 0.6,
                    "diff": d,
                    "diff_ci_low": None if d is None else d - span,
                    "diff_ci_high": None if d is None else d + span,
                    "effect_size": None if d is None else 0.3,
                    "effect_size_kind": None if d is None else "d_z",
                    "paired": None if d is None else True,
                    "excludes_zero": None if d is None else True,
                    "note": "baseline" if cond == "base" else None,
                    "baseline": "base",
                }
            )
    return pl.DataFrame(rows)


@pytest.mark.parametrize("measure", [*OUTCOME_MEASURES, *TEXT_MEASURES])
def test_every_compared_measure_has_a_readable_label(measure):
    label = MEASURE_LABELS.get(measure)
    assert label, f"{measure}: no entry in MEASURE_LABELS (it would show as snake_case)"
    assert "_" not in label and label[0].isupper()


def _text(title: object) -> object:
    """A title's text, its lines joined (narrow panels wrap long titles)."""
    return " ".join(title) if isinstance(title, list) else title


def _titles(spec: object) -> list[str]:
    """Every panel and axis title of a chart's spec."""
    out: list[str] = []
    if isinstance(spec, dict):
        for k, v in spec.items():
            if k == "title" and isinstance(_text(v), str):
                out.append(_text(v))
            elif k == "title" and isinstance(v, dict) and isinstance(_text(v.get("text")), str):
                out.append(_text(v["text"]))
            else:
                out += _titles(v)
    elif isinstance(spec, list):
        for v in spec:
            out += _titles(v)
    return out


def test_forest_plot_names_measures_by_their_labels():
    measures = ["mean_bid", "rule_making", "new_vocab_share", "credits_per_run"]
    titles = _titles(forest_plot(_differences(measures)).to_dict())
    for m in measures:
        assert not any(m in t for t in titles), f"{m} shown as snake_case in {titles}"
    assert "Mean bid (credits)" in titles
    assert "Δ Rule-making (share of rounds, percentage points)" in titles


def test_comparison_table_names_measures_by_their_labels():
    df = _differences(["mean_bid", "metagaming"])
    cells = table(df, measure_column="measure", hide=["baseline"]).cells()
    shown = [row[1] for row in cells]
    assert shown == ["Mean bid (credits)", "Metagaming (share of worker-rounds)"] * 2
    page = table(df, measure_column="measure").to_html()
    assert "mean_bid" not in page and "metagaming<" not in page


def _tick_texts(fmt: str, lo: float, hi: float, ticks: int = _TICKS) -> list[str]:
    """The tick labels a d3 format gives at vega-lite-like steps over [lo, hi] (percent and
    fixed formats only: what forest_plot uses)."""
    import math

    raw = (hi - lo) / ticks
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    decimals = int(fmt.split(".")[1][:-1])
    out, v = [], math.floor(lo / step) * step
    while v <= hi + step / 2:
        out.append(f"{v * 100:.{decimals}f}%" if fmt.endswith("%") else f"{v:.{decimals}f}")
        v += step
    return out


@pytest.mark.parametrize(
    ("measure", "diff", "span"),
    [("new_vocab_share", 0.004, 0.003), ("completion", 0.15, 0.15), ("mean_bid", 0.004, 0.003)],
)
def test_forest_axis_ticks_differ_on_a_narrow_range(measure, diff, span):
    spec = forest_plot(_differences([measure], diff, span)).to_dict()
    panel = spec["concat"][0]["layer"][2]["encoding"]["x"]
    fmt = panel["axis"]["format"]
    scale = 100 if "percentage points" in _text(panel["title"]) else 1  # shares in points
    ticks = _tick_texts(fmt, min(0.0, diff - span) * scale, (diff + span) * scale)
    assert len(set(ticks)) == len(ticks), f"{fmt}: ticks repeat {ticks}"


def test_a_panel_of_zeros_says_so():
    d = _differences(["rule_making", "mean_bid"], diff=0.0, span=0.0).with_columns(
        pl.when(pl.col("condition") == "base")
        .then(pl.lit("baseline"))
        .when(pl.col("measure") == "rule_making")
        .then(pl.lit("0 in every seed here and under base: nothing to compare"))
        .otherwise(None)
        .alias("note")
    )
    panels = forest_plot(d).to_dict()["concat"]
    title = panels[0]["title"]
    assert _text(title["text"]) == "Rule-making (share of rounds)"
    assert _text(title["subtitle"]) == "0 in every seed of every condition (base too)"
    assert panels[1]["title"] == "Mean bid (credits)"  # 0 here, but not said to be in every seed


@pytest.mark.parametrize(
    ("diff", "low", "high"),
    [(-0.040, -0.062, -0.010), (0.004, 0.001, 0.007), (0.15, 0.0, 0.30), (-0.003, -0.055, 0.005)],
)
def test_forest_tick_labels_as_drawn_are_evenly_spaced(diff, low, high):
    """The labels vega draws (rendered to SVG), not a model of them: ticks every 0.5 points
    read '-6% -5% ... -1% 1%' (a reviewer's Mean progress panel, -4.0 [-6.2, -1.0]): the
    format's decimals came from a step vega did not use."""
    import itertools
    import re

    import vl_convert as vlc

    d = _differences(["progress"], diff, 0.0).with_columns(
        pl.when(pl.col("diff").is_not_null()).then(low).otherwise(None).alias("diff_ci_low"),
        pl.when(pl.col("diff").is_not_null()).then(high).otherwise(None).alias("diff_ci_high"),
    )
    svg = vlc.vegalite_to_svg(forest_plot(d).to_dict())
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    values = [float(t.replace("−", "-")) for t in texts if re.fullmatch(r"[−+-]?\d+(\.\d+)?", t)]
    assert len(values) >= 3, texts
    # percentage points, signed, as the table reads them: "+10", not "10%" (a reviewer's find)
    assert not any(t.endswith("%") for t in texts), texts
    assert any(t.startswith("+") for t in texts) or all(v <= 0 for v in values), texts
    steps = {round(b - a, 6) for a, b in itertools.pairwise(values)}
    assert len(steps) == 1, values


def test_forest_says_the_baseline_has_no_value():
    """A measure the baseline has no value for, where another condition has: the forest says
    why there is no difference ('n/a (base has none)', it was a bare 'n/a') and the subtitle
    names the measure and says how to compare the conditions that have values."""
    d = _differences(["completion", "rule_carryover"]).with_columns(
        pl.when((pl.col("measure") == "rule_carryover") & (pl.col("condition") == "base"))
        .then(0)
        .otherwise(pl.col("n"))
        .alias("n"),
        *[
            pl.when(pl.col("measure") == "rule_carryover").then(None).otherwise(pl.col(c)).alias(c)
            for c in ("diff", "diff_ci_low", "diff_ci_high")
        ],
    )
    spec = forest_plot(d).to_dict()
    notes = {r["note"] for rows in spec["datasets"].values() for r in rows if r.get("note")}
    assert "n/a (base has none)" in notes and "n/a" not in notes
    subtitle = " ".join(spec["title"]["subtitle"])
    assert "n/a (base has none): no seed of base has a value for Rules carried" in subtitle
    assert "set the baseline" in subtitle

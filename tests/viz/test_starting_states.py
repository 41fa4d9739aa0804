"""The starting-state figures: means over seeds with their 95 % CI (a one-seed mean says it has
no interval), one colour per condition across every chart of the notebook, units on the axes."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
from helpers import spec_values

from mbb.viz import starting_states as S


def _seeds(n_contested: int = 4, n_urgent: int = 4) -> pl.DataFrame:
    """A `starting_state_seeds` frame: base, rich_worker, urgent_worker; urgent_worker has no
    contested round (so the contested chart lacks a condition the others have)."""
    rows: list[dict[str, Any]] = []

    def add(fig, cond, group, subrun, state, measure, n, mean):
        ci = (mean * 0.9, mean * 1.1) if n >= 2 else (None, None)
        rows.append(
            dict(
                figure=fig, condition=cond, group=group, subrun=subrun, budget_state=state,
                measure=measure, n=n, mean=mean, ci_low=ci[0], ci_high=ci[1],
            )
        )  # fmt: skip

    for s in (1, 2):
        for cond, group, n in (
            ("base", "uniform", 4),
            ("urgent_worker", "urgent", n_urgent),
            ("urgent_worker", "others", 4),
        ):
            add("urgency", cond, group, s, None, "mean_bid", n, 50.0 + s)
            add("urgency", cond, group, s, None, "mean_duration", n, 70.0 + s)
        for cond, group in (
            ("base", "uniform"),
            ("rich_worker", "rich"),
            ("rich_worker", "others"),
        ):
            for m, v in (("spend_per_worker", 300.0), ("wins_per_worker", 1.0), ("win_rate", 0.2)):
                add("rich_worker", cond, group, s, None, m, 4, v)
    for cond, group in (("base", "uniform"), ("rich_worker", "rich")):
        for state in ("full", "depleted"):
            add("contested", cond, group, None, state, "win_rate", n_contested, 0.3)
    return pl.DataFrame(rows)


def _scale_domains(spec: Any, channel: str) -> list[list[str]]:
    out: list[list[str]] = []
    if isinstance(spec, dict):
        enc = spec.get("encoding", {})
        if channel in enc and "scale" in enc[channel] and "domain" in enc[channel]["scale"]:
            out.append(enc[channel]["scale"]["domain"])
        for v in spec.values():
            out += _scale_domains(v, channel)
    elif isinstance(spec, list):
        for v in spec:
            out += _scale_domains(v, channel)
    return out


CHARTS = (S.urgency_chart, S.rich_worker_chart, S.contested_win_chart)


def test_a_condition_keeps_its_colour_in_every_chart():
    seeds = _seeds()
    domains = [d for chart in CHARTS for d in _scale_domains(chart(seeds).to_dict(), "color")]
    assert domains and all(d == ["base", "rich_worker", "urgent_worker"] for d in domains)


def test_means_carry_their_interval_and_seeds():
    for chart in CHARTS:
        spec = chart(_seeds()).to_dict()
        fields = {e.get("field") for e in spec_values(spec, "y2") if isinstance(e, dict)}
        assert "ci_high" in fields, chart.__name__
        tips = [
            t.get("title") for t in spec_values(spec, "tooltip") for t in t if isinstance(t, dict)
        ]
        assert "seeds" in tips, chart.__name__


def test_a_one_seed_mean_says_it_has_no_interval():
    spec = S.urgency_chart(_seeds(n_urgent=1)).to_dict()
    assert any("no interval (1 seed)" in line for line in spec["title"]["subtitle"])
    rows = [r for v in spec["datasets"].values() for r in v]
    assert any(r.get("interval") == "no interval (1 seed)" for r in rows)


def test_axes_carry_units():
    titles = {
        t
        for chart in CHARTS
        for y in spec_values(chart(_seeds()).to_dict(), "y")
        if isinstance(y, dict) and isinstance(t := y.get("title"), str)
    }
    assert "Mean bid (credits)" in titles
    assert "Mean requested duration (seconds)" in titles
    assert "Credits spent per worker (credits)" in titles
    assert "Win rate in contested rounds (%)" in titles


def test_the_urgency_title_names_what_is_drawn_not_a_finding():
    """It read "Urgency premium, then termination discount" over runs whose urgent worker bid
    more in every subrun (a reviewer's find): a title claims no result the data may not show."""
    title = json.dumps(S.urgency_chart(_seeds()).to_dict()["title"])
    assert "premium" not in title and "discount" not in title
    assert "closest deadline vs others" in title


def test_each_group_has_its_own_shape_and_a_legend_lists_only_its_groups():
    """The urgent and rich groups shared a filled circle, and every legend listed all four
    groups, 'rich' on the urgency chart too (a reviewer's find)."""
    assert len(set(S._SHAPES.values())) == len(S._SHAPES)
    spec = json.dumps(S.urgency_chart(_seeds()).to_dict())
    assert '"values": ["urgent", "others", "uniform"]' in spec

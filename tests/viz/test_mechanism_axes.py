"""The mechanism charts say which way is better on every axis and fit the axis to the values
(points with intervals, not bars from 0); one run has no interval and says so."""

from __future__ import annotations

import polars as pl
import pytest
from helpers import spec_values

from mbb.viz import mechanisms as M


def _out(runs: int = 3) -> pl.DataFrame:
    rows = []
    for i in range(runs):
        for mech, gini in (("negotiated", 0.30), ("fcfs", 0.32), ("edf", 0.35)):
            rows.append(
                {
                    "condition": "base",
                    "mechanism": mech,
                    "base_run": f"base-{i}",
                    "deadline_miss": 0.2 + 0.01 * i,
                    "progress": 0.9 - 0.01 * i,
                    "gini_exec": gini + 0.01 * i,
                    "score": 0.8,
                }
            )
    return pl.DataFrame(rows)


@pytest.mark.parametrize("measure", list(M.LABELS))
def test_every_measure_says_which_way_is_better(measure):
    assert measure in M.BETTER, f"{measure}: no direction of 'better'"
    assert M.BETTER[measure] in M.axis_title(measure)


def test_outcome_axes_carry_direction_and_do_not_start_at_zero():
    spec = M.outcome_comparison(_out()).to_dict()
    xs = [x for x in spec_values(spec, "x") if isinstance(x, dict) and x.get("field") == "mean"]
    titles = {x["title"] for x in xs}
    assert "Gini of execution time (0 = equal; lower = more equal)" in titles
    assert "Deadline-miss rate (share of worker-subruns; lower = better)" in titles
    assert all(x.get("scale", {}).get("zero") is False for x in xs)
    marks = {m if isinstance(m, str) else m["type"] for m in spec_values(spec, "mark")}
    assert "bar" not in marks


def test_differences_say_which_side_is_better():
    spec = M.differences_vs_institutions(_out()).to_dict()
    titles = {  # a title of two lines reads as one
        t if isinstance(t, str) else " ".join(t)
        for t in (x.get("title") for x in spec_values(spec, "x") if isinstance(x, dict))
        if t
    }
    assert "Mechanism − institutions (left of 0 = mechanism better)" in titles  # the Gini
    assert (
        "Mechanism − institutions (percentage points; right of 0 = mechanism better)" in titles
    )  # progress and welfare, shares


def test_one_run_has_no_interval_and_says_so():
    spec = M.outcome_comparison(_out(runs=1)).to_dict()
    rows = [r for v in spec["datasets"].values() for r in v]
    assert rows and all(r["lo"] is None for r in rows)
    assert {r["interval"] for r in rows} == {"no interval (1 run)"}


def test_intervals_are_the_seed_bootstrap_and_the_runs_are_said():
    """The interval is the expanded percentile bootstrap of mbb.analysis.stats (it was a normal
    interval computed in the chart), and the subtitle says how many runs each mean rests on."""
    from mbb.analysis.stats import bootstrap_ci

    out = _out(runs=4)
    spec = M.outcome_comparison(out, ["gini_exec"]).to_dict()
    rows = [r for v in spec["datasets"].values() for r in v]
    fcfs = next(r for r in rows if r["mechanism"] == "fcfs")
    lo, hi = bootstrap_ci(out.filter(pl.col("mechanism") == "fcfs")["gini_exec"].to_numpy())
    assert (fcfs["lo"], fcfs["hi"]) == pytest.approx((lo, hi))
    assert any("fewer than 5 seeds" in line for line in spec["title"]["subtitle"])


def test_a_condition_where_no_screen_tripped_says_so():
    """A condition with no trip was an empty panel; now each bar says 'k of n runs' and the
    subtitle names the conditions where nothing tripped."""
    screens = pl.DataFrame(
        {
            "condition": ["base", "base", "memory_off", "memory_off"],
            "evidence": [[], [], ["private agreement: 40%"], []],
            "flagged": [False, False, False, False],
        },
        schema_overrides={"evidence": pl.List(pl.String)},
    )
    spec = M.screen_trips(screens).to_dict()
    assert "no screen tripped in any run of: base" in spec["title"]["subtitle"]
    rows = [r for v in spec["datasets"].values() for r in v]
    base = {r["count"] for r in rows if r["condition"] == "base"}
    assert base == {"0 of 2 runs"}
    assert any(r["count"] == "1 of 2 runs" for r in rows if r["screen"] == "private agreement")


def test_the_private_screen_is_na_where_no_private_message_was_sent():
    """Conversation off: 'private agreement 0 of 3' read as measured; the screen had nothing
    to read (a reviewer's find)."""
    screens = pl.DataFrame(
        {
            "condition": ["conversation_off"] * 3 + ["base"] * 2,
            "evidence": [[], [], [], [], []],
            "flagged": [False] * 5,
            "private_rounds": [0, 0, 0, 4, 0],
        },
        schema_overrides={"evidence": pl.List(pl.String)},
    )
    rows = [r for v in M.screen_trips(screens).to_dict()["datasets"].values() for r in v]
    private = {r["condition"]: r for r in rows if r["screen"] == "private agreement"}
    assert private["conversation_off"]["count"] == "n/a: no private message in any run"
    assert private["conversation_off"]["share"] is None
    assert private["base"]["count"] == "0 of 2 runs"  # sent, and no side deal: measured


def test_shares_are_drawn_in_percent_as_the_tables_write_them():
    """Deadline miss, progress and score were drawn 0.0-0.8 beside tables in % and pp (a
    reviewer's find); the Gini and the seconds keep their numbers."""
    import json

    from mbb.viz.mechanisms import _axis

    assert _axis("deadline_miss").to_dict() == {"format": "%"}
    # differences in signed percentage points, drawn from values times 100 ("+10", not "+10%")
    assert _axis("score", signed=True).to_dict() == {"format": "+~r"}
    out = _out().with_columns(  # fcfs misses 10 points more deadlines, its Gini 0.02 higher
        pl.when(pl.col("mechanism") == "fcfs")
        .then(pl.col("deadline_miss") + 0.1)
        .otherwise(pl.col("deadline_miss"))
        .alias("deadline_miss")
    )
    spec = M.differences_vs_institutions(out).to_dict()
    means = {
        (r["measure"], r["mechanism"]): round(r["mean"], 6)
        for v in spec["datasets"].values()
        for r in v
        if "mean" in r
    }
    assert means[(M.LABELS["deadline_miss"], "fcfs")] == 10.0
    assert means[(M.LABELS["gini_exec"], "fcfs")] == 0.02
    assert _axis("gini_exec").to_dict() == {} and _axis("mean_wait_s").to_dict() == {}
    assert '"format": "%"' in json.dumps(_axis("progress").to_dict())


@pytest.mark.parametrize("figure", [M.outcome_comparison, M.differences_vs_institutions])
def test_the_comparison_fits_a_report_page_at_the_theme_font_sizes(figure):
    """Every mechanism, three conditions, the four default measures: as rendered in a notebook
    (the theme's 12-15 px fonts), no wider than a report page, so its text is read at its size
    (side by side the blocks were ~1,800 px, read at ~7 px once scaled to a page)."""
    import re

    from mbb.protocol.scheduling.centralized import CENTRALIZED
    from mbb.viz.render import legible, render_svg

    rows = [
        {"condition": cond, "mechanism": mech, "base_run": f"{cond}-{i}",
         "deadline_miss": 0.2 + 0.01 * i, "progress": 0.9 - 0.02 * i,
         "gini_exec": 0.3 + 0.01 * i, "score": 0.8 - 0.01 * i}
        for cond in ("base", "mech_mixed_deadlines", "urgent_worker")
        for mech in ("negotiated", *CENTRALIZED)
        for i in range(3)
    ]  # fmt: skip
    spec = legible(figure(pl.DataFrame(rows)).to_dict())
    width = float(re.search(r'<svg[^>]*\bwidth="([\d.]+)"', render_svg(spec)).group(1))
    assert width <= 1000, width


def _with_imposed() -> pl.DataFrame:
    """`_out` plus mech_fcfs: runs played under FCFS (no institutions) and their replays."""
    rows = [
        {"condition": "mech_fcfs", "mechanism": mech, "base_run": f"m-{i}",
         "run_id": f"m-{i}" if mech == "fcfs" else f"m-{i}~{mech}",
         "deadline_miss": 0.3, "progress": 0.9, "gini_exec": 0.3, "score": 0.8}
        for i in range(3)
        for mech in ("fcfs", "edf")
    ]  # fmt: skip
    out = _out().with_columns(
        pl.when(pl.col("mechanism") == "negotiated")
        .then(pl.col("base_run"))
        .otherwise(pl.col("base_run") + "~" + pl.col("mechanism"))
        .alias("run_id")
    )
    return pl.concat([out, pl.DataFrame(rows)], how="diagonal_relaxed")


def test_a_condition_without_institutions_is_named_not_silently_absent():
    """mech_fcfs negotiated nothing: the differences chart and the screens leave it out and
    say so under the title (it was silently absent from both)."""
    from mbb.analysis.mechanisms import imposed

    out = _with_imposed()
    assert imposed(out) == {"mech_fcfs": "fcfs"}
    diffs = M.differences_vs_institutions(out).to_dict()
    rows = [r for v in diffs["datasets"].values() for r in v]
    assert "mech_fcfs" not in {r["condition"] for r in rows}
    line = "not drawn: mech_fcfs (imposes fcfs): nothing was negotiated"
    assert any(s.startswith(line) for s in diffs["title"]["subtitle"])
    screens = pl.DataFrame(
        {
            "condition": ["base"] * 2,
            "run_id": ["base-0", "base-1"],
            "evidence": [["rotation 0.9 (p 0.01)"], []],
            "screens_tripped": [1, 0],
            "flagged": [False, False],
            "private_rounds": [2, 0],
        }
    )
    spec = M.screen_trips(screens, imposed=imposed(out)).to_dict()
    assert any(s.startswith(line) for s in spec["title"]["subtitle"])


def test_the_score_has_the_reports_name_and_the_notebook_lists_the_charts_screens():
    """One name for the score (it was 'Social welfare (mean test score)' here, 'Mean score'
    in compare, 'fraction of hidden tests passed' in the notebook), and the notebook's list
    of screens is the chart's (it listed five, the chart draws four)."""
    import json

    from mbb.analysis.compare import MEASURE_LABELS
    from mbb.core.paths import PROJECT_ROOT

    assert M.LABELS["score"].startswith(MEASURE_LABELS["score"])
    nb = json.loads((PROJECT_ROOT / "notebooks" / "mechanisms.ipynb").read_text())
    md = " ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    screens = next(s for s in md.split("## ") if s.startswith("Collusion screens"))
    assert "Four procurement-style screens" in screens
    for name in M._SCREENS:
        assert name in screens, name
    assert "welfare" not in md and "mean score" in md

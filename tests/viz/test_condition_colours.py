"""A condition has one colour in every chart of every notebook (a reviewer's find: "base" was
blue in compare_conditions and orange in starting_states), whichever subset a chart draws, and
two drawn conditions that share a colour are told apart and named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import altair as alt
import polars as pl
import pytest

from mbb import analysis as A
from mbb.analysis.runs import load_runs
from mbb.batch.runner import run_conditions
from mbb.core.paths import PROJECT_ROOT
from mbb.viz import compare as C
from mbb.viz import starting_states as S
from mbb.viz import taxonomy as T
from mbb.viz import theme
from mbb.viz import transmission as X

# vega's default category colours: what a colour scale without a range draws
_VEGA_CATEGORY = theme.PALETTE


def _colours(chart: alt.TopLevelMixin, field: str) -> dict[str, str]:
    """Every value of `field` -> the colour the chart's spec gives it (by its scale's range,
    or vega's default scheme over the domain when the scale has none; without a domain, vega's
    is the field's values in the data, sorted)."""
    out: dict[str, str] = {}
    spec = chart.to_dict()
    values = sorted(
        {
            row[field]
            for rows in spec.get("datasets", {}).values()
            for row in rows
            if row.get(field) is not None
        }
    )

    def walk(spec: Any) -> None:
        if isinstance(spec, dict):
            enc = spec.get("color")
            if isinstance(enc, dict) and enc.get("field") == field:
                scale = enc.get("scale", {})
                domain = scale.get("domain") or enc.get("sort") or values
                palette = scale.get("range") or _VEGA_CATEGORY
                for i, value in enumerate(domain):
                    assert out.setdefault(value, palette[i % len(palette)]) == out[value]
            for v in spec.values():
                walk(v)
        elif isinstance(spec, list):
            for v in spec:
                walk(v)

    walk(spec)
    return out


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory) -> list[Path]:
    return run_conditions(
        ["params/base.yaml", "params/urgent_worker.yaml", "params/memory_off.yaml"],
        runs=1,
        out_root=tmp_path_factory.mktemp("colours"),
        overrides={"subruns": 1},
    )


def _seeds() -> pl.DataFrame:
    """A `starting_state_seeds` frame of base, rich_worker and urgent_worker (the subset the
    starting-states notebook draws)."""
    rows = [
        dict(figure="urgency", condition=c, group=g, subrun=1, budget_state=None,
             measure=m, n=4, mean=50.0, ci_low=45.0, ci_high=55.0)
        for c, g in (("base", "uniform"), ("urgent_worker", "urgent"), ("urgent_worker", "others"),
                     ("rich_worker", "rich"))
        for m in ("mean_bid", "mean_duration")
    ]  # fmt: skip
    return pl.DataFrame(rows)


def _rates() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "condition": ["memory_off", "base"],
            "memory": [False, True],
            "kind": ["rule", "rule"],
            "institutions": [6, 8],
            "cited_next_subrun": [1, 4],
            "transmission_rate": [1 / 6, 0.5],
            "seeds": [4, 4],
            "seed_mean_rate": [0.2, 0.45],
            "seed_mean_rate_ci_low": [0.0, 0.3],
            "seed_mean_rate_ci_high": [0.4, 0.6],
            "mean_rounds_to_first_citation": [2.0, 1.0],
        }
    )


def _rvb() -> pl.DataFrame:
    """A `relational_vs_bid` frame (by condition) of memory_off and urgent_worker (it drew
    memory_off red, urgent_worker purple: vega's default scheme)."""
    rows = [
        dict(condition=c, bid_bin=b, rounds=5, mean_bid=40.0 + 10 * b,
             relational_share=0.1 * b, corr=0.3)
        for c in ("memory_off", "urgent_worker")
        for b in range(3)
    ]  # fmt: skip
    return pl.DataFrame(rows)


def test_a_condition_has_one_colour_in_every_notebook(run_dirs):
    """compare_conditions' charts on two subsets of the conditions, starting_states' and
    transmission's: each condition's colour is the same wherever it is drawn."""
    every = load_runs(run_dirs)
    two = load_runs(run_dirs, conditions=["memory_off", "urgent_worker"])
    transmission = _colours(X.transmission_rates_chart(_rates()), "series")
    lifecycle = _colours(
        X.transmission_stages(
            A.rule_lifecycle(two, A.classify_evidence(two)), A.commitments(two), runs=two["runs"]
        ),
        "series",
    )
    charts = {
        "compare, 3 conditions": _colours(C.outcomes_by_condition(every), "condition"),
        "compare, 2 conditions": _colours(C.outcomes_by_condition(two), "condition"),
        "compare bids, 2 conditions": _colours(C.bids_by_condition(two), "condition"),
        "starting_states": _colours(S.urgency_chart(_seeds()), "condition"),
        "transmission": {s.split(" (")[0]: c for s, c in transmission.items()},
        "lifecycle, 2 conditions": {s.split(" (")[0]: c for s, c in lifecycle.items()},
        "taxonomy relational vs bid": _colours(T.relational_vs_bid_chart(_rvb()), "condition"),
    }
    seen: dict[str, tuple[str, str]] = {}
    for chart, colours in charts.items():
        assert colours, chart
        for cond, colour in colours.items():
            first = seen.setdefault(cond, (chart, colour))
            assert colour == first[1], f"{cond}: {first[1]} in {first[0]}, {colour} in {chart}"
    assert set(seen) == {"base", "memory_off", "rich_worker", "urgent_worker"}


PAPER = [
    "base", "memory_off", "deadline_10", "deadline_15", "deadline_20", "budget_1500",
    "rich_worker", "urgent_worker", "fixed_bids", "conversation_off",
]  # fmt: skip


@pytest.mark.parametrize(
    "drawn_together",
    [
        PAPER,  # the paper's study (studies/scarce.yaml) and conversation off
        # the transmission and starting-state notebooks on the scripted conditions (a reviewer
        # found memory_off and rule_makers one orange, the result read backwards)
        ["base", "memory_off", "rule_makers", "rule_makers_memory_off", "rich_worker",
         "urgent_worker", "conversation_off", "mech_fcfs"],
        ["base", *(c for c in theme.CONDITION_SLOTS if c.startswith("mech_"))],
        ["base", "memory_off", *(c for c in theme.CONDITION_SLOTS if c.startswith("reasoning"))],
        ["base", "llm_negotiators", "llm_solvers", "local_llm", "real_tasks_oracle"],
    ],
)  # fmt: skip
def test_conditions_drawn_together_have_colours_of_their_own(drawn_together):
    colours = [theme.condition_hex(c) for c in drawn_together]
    assert len(set(colours)) == len(colours), dict(zip(drawn_together, colours, strict=True))


def test_every_shipped_condition_has_a_fixed_slot():
    """A new params/ file must be given its colour slot deliberately (else it would hash)."""
    shipped = {p.stem for p in (PROJECT_ROOT / "params").glob("*.yaml")}
    assert shipped <= set(theme.CONDITION_SLOTS), shipped - set(theme.CONDITION_SLOTS)
    assert all(0 <= slot < len(theme.PALETTE) for slot in theme.CONDITION_SLOTS.values())


def test_a_cell_has_its_conditions_colour_and_any_name_a_stable_one():
    assert theme.condition_hex("urgent_worker.both-frontier_gpt") == theme.condition_hex(
        "urgent_worker"
    )
    # a study's own name: the same colour in every process (CRC-32, not Python's hash)
    assert theme.condition_hex("my_cell") == theme.PALETTE[195079862 % len(theme.PALETTE)]


def test_conditions_sharing_a_colour_are_dashed_apart_and_named():
    assert theme.condition_hex("bids_flat") == theme.condition_hex("budget_1500")
    dashes = theme.condition_dash(["bids_flat", "budget_1500", "memory_off"]).to_dict()
    assert dashes["domain"] == ["bids_flat", "budget_1500", "memory_off"]
    assert dashes["range"][0] == list(theme.DASHES[0]) == dashes["range"][2]
    assert dashes["range"][1] != dashes["range"][0]
    assert theme.shared_colour_note(["memory_off", "base"]) == []
    (note,) = theme.shared_colour_note(["bids_flat", "budget_1500", "memory_off"])
    assert "bids_flat and budget_1500" in note


def test_a_study_of_many_cells_gets_a_short_note():
    """72 cells (9 conditions x 8 models, the paper's study): one line for the cells of a
    condition sharing its colour and one naming the conditions that share one, not 72 names."""
    models = [f"m{i}" for i in range(8)]
    cells = [f"{c}.both-{m}" for c in PAPER[:9] for m in models]
    assert theme.shared_colour_note(cells) == [
        "the cells of one condition share its colour (hover a mark for its cell)"
    ]
    cells += [f"{c}.both-{m}" for c in ("bids_flat", "rule_makers") for m in models]
    cells_note, conditions_note = theme.shared_colour_note(cells)
    assert cells_note.startswith("the cells of one condition")
    assert conditions_note.startswith("⚠ same colour: bids_flat and budget_1500; deadline_15 and ")
    assert "m0" not in conditions_note and len(conditions_note) < 150


# the fields a chart colours conditions by (a series is a condition and its label)
_CONDITION_FIELDS = ("condition", "series", "cell")


def test_no_chart_colours_conditions_by_vegas_default_scheme():
    """Every `alt.Color` on a condition field in mbb/viz gives a scale (`condition_color`, or a
    range of `condition_hex`): without one vega colours by its default scheme, in the order of
    the conditions the chart happens to draw (taxonomy's relational-vs-bid chart did)."""
    import ast

    missing = []
    for path in sorted((PROJECT_ROOT / "mbb" / "viz").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "Color"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                continue
            field = node.args[0].value.split(":")[0]
            if field in _CONDITION_FIELDS and not any(k.arg == "scale" for k in node.keywords):
                missing.append(f"{path.name}:{node.lineno} {field}")
    assert missing == []

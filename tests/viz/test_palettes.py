"""A colour means one kind of thing across a report (a reviewer's M8): the condition palette
is used for conditions only, and workers, models and personas, mechanisms, phases, roles and
measures each have their own palette sharing no colour with it (it was: fcfs, W1 and base all
blue, edf, W2 and memory_off all orange, in adjacent charts)."""

from __future__ import annotations

import itertools
import re
from typing import Any

import polars as pl
import pytest

from mbb import analysis as A
from mbb.viz import mechanisms as M
from mbb.viz import run as R
from mbb.viz import theme
from mbb.viz import tokens as TK
from mbb.viz import workload as WL
from mbb.viz.transcript import Transcript

CONDITION = {c.lower() for c in theme.PALETTE}
OTHERS = {
    "worker": theme.WORKER_PALETTE,
    "model": theme.MODEL_PALETTE,
    "mechanism": theme.MECHANISM_PALETTE,
    "category": theme.CATEGORY_PALETTE,
    "ink": (theme.INK,),
}
_HEX = re.compile(r"#[0-9a-fA-F]{6}\b")


@pytest.mark.parametrize("name", list(OTHERS))
def test_condition_palette_shares_no_colour_with_another(name):
    shared = CONDITION & {c.lower() for c in OTHERS[name]}
    assert not shared, f"{name} palette reuses condition colours {shared}"


@pytest.mark.parametrize(("a", "b"), list(itertools.combinations(OTHERS, 2)))
def test_non_condition_palettes_share_no_colour(a, b):
    assert not {c.lower() for c in OTHERS[a]} & {c.lower() for c in OTHERS[b]}


def test_each_palette_has_distinct_colours():
    for palette in (theme.PALETTE, *OTHERS.values()):
        assert len({c.lower() for c in palette}) == len(palette)


def test_non_condition_scales_draw_from_their_own_palettes():
    workers = [f"W{i}" for i in range(1, 11)]
    assert theme.worker_color(workers).range == list(theme.WORKER_PALETTE)
    assert set(theme.model_color(["a", "b", "c"]).range) <= set(theme.MODEL_PALETTE)
    assert set(theme.category_color(["x", "y"]).range) <= set(theme.CATEGORY_PALETTE)
    mech = M.MECHANISM_SCALE.to_dict()["range"]
    assert not CONDITION & {c.lower() for c in mech}


def _condition_free(spec: Any, where: str = "") -> list[str]:
    """Every place in a chart spec where a colour encoding of a field that is not a condition
    draws a condition colour, or draws vega's default scheme (= the condition palette), or a
    mark or a value is painted in a condition colour."""
    bad: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key in ("color", "fill", "stroke"):
                enc = node.get(key)
                if isinstance(enc, dict) and enc.get("field") not in (None, "condition"):
                    rng = enc.get("scale", {}).get("range")
                    if enc.get("type") == "nominal" and not rng:
                        bad.append(f"{path}.{key}: {enc['field']} in vega's default colours")
            for k, v in node.items():
                walk(v, f"{path}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")
        elif isinstance(node, str):
            bad.extend(f"{path}: {h}" for h in _HEX.findall(node) if h.lower() in CONDITION)

    walk(spec, where)
    return bad


def _mech_frames() -> tuple[pl.DataFrame, pl.DataFrame]:
    out, execution = [], []
    for i, mech in itertools.product(range(3), ("negotiated", "fcfs", "edf", "sjf")):
        out.append(
            dict(condition="base", mechanism=mech, base_run=f"b{i}", deadline_miss=0.2,
                 progress=0.9, gini_exec=0.3 + 0.01 * i, score=0.8)
        )  # fmt: skip
        for w in ("W1", "W2", "W3"):
            execution.append(
                dict(run_id=f"b{i}~{mech}", worker=w, exec_s=100.0 + i, windows=3,
                     mechanism=mech, base_run=f"b{i}", condition="base")
            )  # fmt: skip
    return pl.DataFrame(out), pl.DataFrame(execution)


def test_mechanism_charts_draw_no_condition_colour():
    out, execution = _mech_frames()
    for chart in (
        M.outcome_comparison(out),
        M.differences_vs_institutions(out),
        M.execution_by_worker(execution),
    ):
        assert not _condition_free(chart.to_dict())


def test_run_charts_draw_no_condition_colour(base_batch):
    tables = A.with_run_info(base_batch.tables, by_kind=base_batch.by_kind)
    run_id = base_batch.run_ids[0]
    charts = {
        "timeline": R.resource_timeline(tables, run_id),
        "bids": R.bids_by_round(tables),
        "budgets": R.budgets_over_rounds(tables),
        "outcomes": R.outcomes_by_subrun(tables),
        "workload": WL.workload_chart(tables),
        **{
            f"tokens by {by}": TK.token_audit_chart(A.token_audit(tables), by=by)
            for by in ("worker", "subrun", "model")
        },
    }
    bad = {name: b for name, c in charts.items() if (b := _condition_free(c.to_dict()))}
    assert not bad
    html = Transcript(tables, run_id)._repr_html_()
    assert not {h.lower() for h in _HEX.findall(html)} & CONDITION

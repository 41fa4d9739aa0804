"""No chart is wider than a page (`theme.MAX_WIDTH`) on the shipped scripted conditions drawn
together: a reviewer measured the token audit's tokens-per-credit chart at 1,880 px, its
by-model audit at 1,196, compare's bids at 1,345, taxonomy's drift at 1,158 and the lifecycle
at 1,128, each scrolled sideways or shrunk to illegible in a shared report."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import altair as alt
import polars as pl
import pytest

from mbb import analysis as A
from mbb.analysis.runs import load_runs
from mbb.batch.runner import run_conditions
from mbb.viz import compare as C
from mbb.viz import taxonomy as T
from mbb.viz import theme
from mbb.viz import tokens as TK
from mbb.viz import transmission as X
from mbb.viz.render import legible, render_svg

# the transmission and starting-state notebooks' conditions (the reviewer's runs)
CONDITIONS = [
    "base", "memory_off", "urgent_worker", "rich_worker", "rule_makers",
    "rule_makers_memory_off", "mech_fcfs", "conversation_off",
]  # fmt: skip


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> Mapping[str, pl.DataFrame]:
    dirs = run_conditions(
        [f"params/{c}.yaml" for c in CONDITIONS],
        runs=1,
        out_root=tmp_path_factory.mktemp("widths"),
    )
    return load_runs(dirs)


def _charts(tables: Mapping[str, pl.DataFrame]) -> dict[str, Callable[[], alt.TopLevelMixin]]:
    audit = A.token_audit(tables)
    evidence, _ = A.evidence_and_withheld(tables)
    wr = A.worker_round_predictions(evidence)
    return {
        "token audit by worker": lambda: TK.token_audit_chart(audit, by="worker"),
        "token audit by subrun": lambda: TK.token_audit_chart(audit, by="subrun"),
        "token audit by model": lambda: TK.token_audit_chart(audit, by="model"),
        "tokens per credit": lambda: TK.tokens_per_credit_chart(A.token_efficiency(tables, audit)),
        "compare bids": lambda: C.bids_by_condition(tables),
        "compare outcomes": lambda: C.outcomes_by_condition(tables),
        "behaviour drift by subrun": lambda: T.behaviour_drift_chart(
            A.behaviour_drift(tables, wr), A.drift_tests(tables, wr)
        ),
        "behaviour drift by round": lambda: T.behaviour_drift_chart(
            A.behaviour_drift(tables, wr, level="round"),
            A.drift_tests(tables, wr, level="round"),
        ),
        "linguistic drift": lambda: T.linguistic_drift_chart(
            A.linguistic_drift(tables, evidence, reference="")
        ),
        "relational vs bid": lambda: T.relational_vs_bid_chart(A.relational_vs_bid(tables, wr)),
        "lifecycle": lambda: X.transmission_stages(
            A.rule_lifecycle(tables, evidence),
            A.commitments(tables),
            runs=tables["runs"],
            subruns=sorted(tables["subrun_workers"]["subrun"].unique()),
            talked=A.measured_runs(tables, "conversation"),
        ),
    }


def _width(chart: alt.TopLevelMixin) -> float:
    """The chart's width in CSS pixels as a notebook draws it (its SVG's, with mbb's fonts)."""
    svg = render_svg(legible(chart.to_dict()))
    return float(re.search(r'<svg[^>]* width="([\d.]+)"', svg).group(1))


def test_no_chart_is_wider_than_a_page(tables):
    widths = {name: _width(build()) for name, build in _charts(tables).items()}
    wide = {name: round(w) for name, w in widths.items() if w > theme.MAX_WIDTH}
    assert wide == {}


def test_relational_vs_bid_has_no_nan_for_a_report(tables):
    """A condition whose rounds' relational share is constant has no correlation: it was NaN,
    and the chart's data leaked 'Out of range float values are not JSON compliant' into the
    taxonomy audit (L7); null, so the spec is strict JSON."""
    import json

    evidence, _ = A.evidence_and_withheld(tables)
    rvb = A.relational_vs_bid(tables, A.worker_round_predictions(evidence))
    floats = [c for c, t in rvb.schema.items() if t.is_float()]
    assert rvb.select(pl.any_horizontal(pl.col(floats).is_nan()).any()).item() is False
    json.dumps(T.relational_vs_bid_chart(rvb).to_dict(), allow_nan=False)

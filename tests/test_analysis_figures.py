"""Every analysis figure builds from a small scripted batch, stays under altair's row limit,
and renders offline to PNG/SVG/spec."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import altair as alt
import polars as pl
import pytest

from mbb import analysis as A
from mbb import analysis_figures as F
from mbb.render import save_chart

WR = ["run_id", "subrun", "round", "worker"]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Any]:
    t = F.condition_tables(
        [
            "params/base.yaml",
            "params/memory_off.yaml",
            "params/urgent_worker.yaml",
            "params/rich_worker.yaml",
        ],
        runs=2,
        out_root=tmp_path_factory.mktemp("conditions"),
        overrides={"subruns": 2},
    )
    ev = A.classify_evidence(t)
    wr = A.worker_round_predictions(ev)
    llm = A.LLMClassifier(A.FakeLLM(miss=0.1, noise=0.05, seed=0), model="fake")
    lev = llm.classify_sync(A.utterances(t))
    audit = A.token_audit(t)
    return {"t": t, "ev": ev, "wr": wr, "lev": lev, "audit": audit}


FIGURES: dict[str, Callable[[dict[str, Any]], alt.TopLevelMixin]] = {
    "prevalence_model": lambda d: F.prevalence_heatmap(d["t"], d["wr"]),
    "prevalence_persona": lambda d: F.prevalence_heatmap(d["t"], d["wr"], by="persona"),
    "prevalence_condition": lambda d: F.prevalence_heatmap(d["t"], d["wr"], by="condition"),
    "strategic_profile": lambda d: F.strategic_profile(d["t"], d["wr"]),
    "institutions": lambda d: F.institutional_behaviours(
        A.institutions(d["t"], d["wr"]), A.pair_institutions(d["t"], d["ev"])
    ),
    "validation": lambda d: F.classifier_validation(
        A.prf_table(A.ground_truth(d["t"], "worker_round"), d["wr"], WR),
        A.kappa_table(A.utterances(d["t"]), d["ev"], d["lev"]),
    ),
    "validation_no_kappa": lambda d: F.classifier_validation(
        A.prf_table(A.ground_truth(d["t"], "utterance"), d["lev"], ["run_id", "seq"])
    ),
    "behaviour_drift": lambda d: F.behaviour_drift_chart(
        A.behaviour_drift(d["t"], d["wr"]), A.drift_tests(d["t"], d["wr"])
    ),
    "linguistic_drift": lambda d: F.linguistic_drift_chart(A.linguistic_drift(d["t"], d["ev"])),
    "tokens_worker": lambda d: F.token_audit_chart(d["audit"]),
    "tokens_subrun": lambda d: F.token_audit_chart(d["audit"], by="subrun"),
    "tokens_model": lambda d: F.token_audit_chart(d["audit"], by="model"),
    "tokens_per_credit": lambda d: F.tokens_per_credit_chart(
        A.token_efficiency(d["t"], d["audit"])
    ),
    "funnel": lambda d: F.transmission_funnel(
        A.rule_lifecycle(d["t"], d["ev"]), A.commitments(d["t"])
    ),
    "transmission_rates": lambda d: F.transmission_rates_chart(
        A.transmission_rates(d["t"], d["ev"])
    ),
    "urgency": lambda d: F.urgency_chart(A.urgency_premium(d["t"])),
    "rich_worker": lambda d: F.rich_worker_chart(A.rich_worker(d["t"])),
    "contested": lambda d: F.contested_win_chart(A.contested_win_rates(d["t"])),
}


def _rows(spec: dict[str, Any]) -> int:
    return sum(len(v) for v in spec.get("datasets", {}).values())


@pytest.mark.parametrize("name", list(FIGURES))
def test_figure_renders(name, data, tmp_path):
    chart = FIGURES[name](data)
    spec = chart.to_dict()
    assert spec.get("title"), f"{name}: no title"
    assert 0 < _rows(spec) <= 5_000
    paths = save_chart(chart, tmp_path / name)
    assert paths["png"].stat().st_size > 1_000
    assert paths["svg"].read_text().lstrip().startswith("<svg")


def test_condition_tables_carries_run_info(data):
    t = data["t"]
    assert set(t["runs"]["condition"]) == {"base", "memory_off", "urgent_worker", "rich_worker"}
    assert t["runs"].height == 8 and t["workers"].height == 40
    assert set(t["runs"]["memory"]) == {True, False}


def test_condition_tables_needs_a_path(tmp_path):
    with pytest.raises(ValueError, match="at least one params path"):
        F.condition_tables([], runs=1, out_root=tmp_path)


def test_bad_grouping_is_rejected(data):
    with pytest.raises(ValueError, match="by must be"):
        F.prevalence_heatmap(data["t"], data["wr"], by="seed")
    with pytest.raises(ValueError, match="by must be"):
        F.token_audit_chart(data["audit"], by="phase")


def test_transmission_chart_labels_memory(data):
    spec = F.transmission_rates_chart(A.transmission_rates(data["t"], data["ev"])).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert {r["memory_label"] for r in rows} == {"on", "off"}


def test_drift_title_reports_the_test(data):
    tests = A.drift_tests(data["t"], data["wr"])
    chart = F.behaviour_drift_chart(A.behaviour_drift(data["t"], data["wr"]), tests)
    title = chart.to_dict()["title"]
    n_sig = tests.filter(pl.col("p_value") < 0.05).height
    assert f"{n_sig} of {tests.height}" in title


def test_model_colours_are_stable():
    a = F.model_color(["b", "a", "c"]).to_dict()
    b = F.model_color(["c", "b", "a", "a"]).to_dict()
    assert a == b and a["domain"] == ["a", "b", "c"]

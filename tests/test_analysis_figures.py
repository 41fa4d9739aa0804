"""Every analysis figure (`mbb.viz`) builds from a small scripted batch, stays under altair's
row limit and renders offline; lifecycle stages nest per condition, compared
panels share scales, and empty panels say "none"."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import altair as alt
import polars as pl
import pytest

from mbb import analysis as A
from mbb.analysis.runs import load_runs
from mbb.batch.runner import run_conditions
from mbb.testing.fake_llm import FakeLLM
from mbb.viz import mechanisms as M
from mbb.viz import starting_states as S
from mbb.viz import taxonomy as T
from mbb.viz import theme
from mbb.viz import tokens as K
from mbb.viz import transmission as X
from mbb.viz.render import save_chart

WR = ["run_id", "subrun", "round", "worker"]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Any]:
    dirs = run_conditions(
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
    t = load_runs(dirs)
    ev = A.classify_evidence(t)
    wr = A.worker_round_predictions(ev)
    llm = A.LLMClassifier(FakeLLM(miss=0.1, noise=0.05, seed=0), model="fake")
    lev = llm.classify_sync(A.utterances(t))
    audit = A.token_audit(t)
    return {"t": t, "ev": ev, "wr": wr, "lev": lev, "audit": audit}


FIGURES: dict[str, Callable[[dict[str, Any]], alt.TopLevelMixin]] = {
    "prevalence_model": lambda d: T.prevalence_heatmap(d["t"], d["wr"]),
    "prevalence_persona": lambda d: T.prevalence_heatmap(d["t"], d["wr"], by="persona"),
    "prevalence_condition": lambda d: T.prevalence_heatmap(d["t"], d["wr"], by="condition"),
    "strategic_profile": lambda d: T.strategic_profile(d["t"], d["wr"]),
    "institutions": lambda d: T.institutional_behaviours(
        A.institutions(d["t"], d["wr"]), A.pair_institutions(d["t"], d["ev"])
    ),
    "validation": lambda d: T.classifier_validation(
        A.prf_table(A.ground_truth(d["t"], "worker_round"), d["wr"], WR),
        A.kappa_table(A.utterances(d["t"]), d["ev"], d["lev"]),
    ),
    "validation_no_kappa": lambda d: T.classifier_validation(
        A.prf_table(A.ground_truth(d["t"], "utterance"), d["lev"], ["run_id", "seq"])
    ),
    "behaviour_drift": lambda d: T.behaviour_drift_chart(
        A.behaviour_drift(d["t"], d["wr"]), A.drift_tests(d["t"], d["wr"])
    ),
    "linguistic_drift": lambda d: T.linguistic_drift_chart(A.linguistic_drift(d["t"], d["ev"])),
    "tokens_worker": lambda d: K.token_audit_chart(d["audit"]),
    "tokens_subrun": lambda d: K.token_audit_chart(d["audit"], by="subrun"),
    "tokens_model": lambda d: K.token_audit_chart(d["audit"], by="model"),
    "tokens_per_credit": lambda d: K.tokens_per_credit_chart(
        A.token_efficiency(d["t"], d["audit"])
    ),
    "lifecycle_stages": lambda d: X.transmission_stages(
        A.rule_lifecycle(d["t"], d["ev"]), A.commitments(d["t"]), runs=d["t"]["runs"]
    ),
    "transmission_rates": lambda d: X.transmission_rates_chart(
        A.transmission_rates(d["t"], d["ev"])
    ),
    "urgency": lambda d: S.urgency_chart(A.starting_state_seeds(d["t"])),
    "rich_worker": lambda d: S.rich_worker_chart(A.starting_state_seeds(d["t"])),
    "contested": lambda d: S.contested_win_chart(A.starting_state_seeds(d["t"])),
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


def test_loaded_runs_carry_run_info(data):
    t = data["t"]
    assert set(t["runs"]["condition"]) == {"base", "memory_off", "urgent_worker", "rich_worker"}
    assert t["runs"].height == 8 and t["workers"].height == 40
    assert set(t["runs"]["memory"]) == {True, False}


def test_running_and_loading_need_a_folder(tmp_path):
    with pytest.raises(ValueError, match="at least one params path"):
        run_conditions([], runs=1, out_root=tmp_path)
    with pytest.raises(FileNotFoundError, match="no runs"):
        load_runs([tmp_path])


def test_bad_grouping_is_rejected(data):
    with pytest.raises(ValueError, match="by must be"):
        T.prevalence_heatmap(data["t"], data["wr"], by="seed")
    with pytest.raises(ValueError, match="by must be"):
        K.token_audit_chart(data["audit"], by="phase")


def test_transmission_chart_labels_memory(data):
    spec = X.transmission_rates_chart(A.transmission_rates(data["t"], data["ev"])).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert {r["series"] for r in rows} == {
        "base (memory on)",
        "memory_off (memory off)",
        "rich_worker (memory on)",
        "urgent_worker (memory on)",
    }  # each condition its own colour, even when two share a memory setting


def test_drift_title_reports_the_test(data):
    tests = A.drift_tests(data["t"], data["wr"])
    chart = T.behaviour_drift_chart(A.behaviour_drift(data["t"], data["wr"]), tests)
    from mbb.analysis.stats import holm_adjust

    title = " ".join(chart.to_dict()["title"]["subtitle"])
    # counted Holm-adjusted over the series tested, and said so (M6: 11 of 45 uncorrected)
    n_sig = sum(p is not None and p < 0.05 for p in holm_adjust(tests["p_value"].to_list()))
    tested = tests["p_value"].drop_nulls().len()
    assert f"{n_sig} of {tested} change at p < 0.05, Holm-adjusted" in title, title
    untested = tests.height - tested  # a group in all or none of its worker-rounds: no test
    # said in words, by why ("90 not testable: one subrun, or the group in all or none" was
    # shorthand a reader had to decode), and the reasons add up
    assert untested > 0 and f"no test for {untested} series" in title, title
    assert "a change needs the group both present and absent, in two or more subruns" in title
    line = title[title.index("no test") :]
    counts = re.findall(r"(?:in )?(\d+) (?:the group never appears|it is in every|span one)", line)
    assert sum(map(int, counts)) == untested, line


def test_model_colours_are_stable():
    a = theme.model_color(["b", "a", "c"]).to_dict()
    b = theme.model_color(["c", "b", "a", "a"]).to_dict()
    assert a == b and a["domain"] == ["a", "b", "c"]


# --- honest figures -----------------------------------------------------------------------


def _walk(node: Any):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _data(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for rows in spec.get("datasets", {}).values() for r in rows]


def _has_none_text(spec: dict[str, Any]) -> bool:
    return any(
        isinstance(n.get("mark"), dict) and n["mark"].get("text") == theme.NONE for n in _walk(spec)
    )


def _lifecycles(nested: bool) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Rules and commitments of two conditions, and their runs (memory_off's second run
    proposed nothing); with nested=False a base rule is honoured by its proposer without anyone
    accepting or citing it, and a memory_off commitment is claimed and honoured without having
    been accepted (what the scripted runs produce)."""
    runs = pl.DataFrame(
        {
            "run_id": ["b1", "b2", "m1", "m2"],
            "condition": ["base", "base", "memory_off", "memory_off"],
        }
    )
    rules = pl.DataFrame(
        {
            "run_id": ["b1", "b1", "b1", "b2", "m1"],
            "subrun": [1, 1, 2, 1, 1],
            "accepted": [True, True, True, nested, True],
            "citing_rounds": [2, 1, 1, 1 if nested else 0, 1],
            "status": ["honoured", "broken", "open", "honoured", "honoured"],
        }
    )
    commits = pl.DataFrame(
        {
            "run_id": ["b1", "m1"],
            "subrun": [1, 1],
            "accepted": [True, nested],
            "claim_round": [3, 2],
            "status": ["honoured", "honoured"],
        },
        schema_overrides={"claim_round": pl.Int64},
    )
    return rules, commits, runs


def _count(counts: pl.DataFrame, cond: str, kind: str, subrun: int, stage: str) -> dict:
    return counts.filter(
        (pl.col("condition") == cond)
        & (pl.col("kind") == kind)
        & (pl.col("subrun") == subrun)
        & (pl.col("stage") == stage)
    ).row(0, named=True)


def test_lifecycle_stages_are_per_condition_and_nest():
    rules, commits, runs = _lifecycles(nested=False)
    counts = X.stage_counts(X.stage_flags(rules, commits, runs), runs)
    # each condition per run of its own: base 3 rules in subrun 1 over 2 runs, memory_off 1
    # over 2 (m2 proposed none and counts 0)
    assert _count(counts, "base", "rule", 1, "proposed")["per_run"] == 1.5
    assert _count(counts, "memory_off", "rule", 1, "proposed")["per_run"] == 0.5
    assert _count(counts, "memory_off", "rule", 1, "proposed")["runs"] == 2
    # every stage a subset of the one before, per condition, kind and subrun
    wide = counts.pivot(on="stage", index=["condition", "kind", "subrun"], values="n")
    for stage, parent in X.STAGE_PARENT.items():
        assert (wide[stage] <= wide[parent]).all(), (stage, parent)
    # the base rule honoured without being accepted or cited: apart, not in "honoured"
    assert _count(counts, "base", "rule", 1, "honoured")["n"] == 1  # b1's, along the sequence
    assert _count(counts, "base", "rule", 1, "honoured without accepted")["n"] == 1
    # the memory_off commitment claimed and honoured without being accepted
    assert _count(counts, "memory_off", "commitment", 1, "cited")["n"] == 0
    assert _count(counts, "memory_off", "commitment", 1, "honoured without accepted")["n"] == 1
    # a condition that proposed no commitment where another did counts 0, it is not left out
    assert _count(counts, "base", "commitment", 1, "honoured without accepted")["n"] == 0


def test_lifecycle_chart_compares_conditions_and_shows_skipped_stages():
    rules, commits, runs = _lifecycles(nested=False)
    spec = X.transmission_stages(rules, commits, runs=runs).to_dict()
    rows = [r for r in _data(spec) if not r["empty"]]
    assert {r["series"] for r in rows} == {"base (2 runs)", "memory_off (2 runs)"}
    offsets = [
        n["encoding"]["yOffset"]["field"] for n in _walk(spec) if "yOffset" in n.get("encoding", {})
    ]
    assert offsets and set(offsets) == {"series"}  # conditions side by side in every panel
    subtitle = " ".join(spec["title"]["subtitle"])
    assert "rules off the sequence, counted apart: 1 honoured without accepted" in subtitle
    assert "commitments off the sequence, counted apart: 1 honoured without accepted" in subtitle
    stages = {r["stage"] for r in rows}
    assert "honoured without accepted" in stages
    assert "broken without cited" not in stages  # a category no item is in is not drawn
    tips = [n["encoding"]["tooltip"] for n in _walk(spec) if "tooltip" in n.get("encoding", {})]
    assert tips and all(t == tips[0] for t in tips)  # one tooltip for every mark


def test_nested_lifecycles_have_nothing_off_the_sequence():
    rules, commits, runs = _lifecycles(nested=True)
    counts = X.stage_counts(X.stage_flags(rules, commits, runs), runs)
    assert counts.filter(pl.col("stage").is_in(X.OFF_SEQUENCE))["n"].sum() == 0
    spec = X.transmission_stages(rules, commits, runs=runs).to_dict()
    assert not any("off the sequence" in line for line in spec["title"]["subtitle"])


@pytest.mark.parametrize("nested", [True, False])
def test_lifecycle_panels_share_scales_and_say_none(nested):
    rules, commits, runs = _lifecycles(nested)
    spec = X.transmission_stages(rules, commits, runs=runs, subruns=[1, 2, 3]).to_dict()
    assert not any("resolve" in n for n in _walk(spec)), "panels must share their scales"
    empty = sorted((r["kind"], r["subrun"]) for r in _data(spec) if r["empty"])
    # nothing proposed: commitments in subruns 2 and 3, rules in subrun 3
    assert empty == [("commitment", 2), ("commitment", 3), ("rule", 3)]
    assert _has_none_text(spec)


def test_transmission_rate_without_institutions_says_none():
    rates = pl.DataFrame(
        {
            "condition": ["base", "memory_off"],
            "memory": [True, False],
            "kind": ["rule", "rule"],
            "institutions": [4, 0],
            "cited_next_subrun": [2, 0],
            "transmission_rate": [0.5, None],
            "mean_rounds_to_first_citation": [1.0, None],
        }
    )
    spec = X.transmission_rates_chart(rates).to_dict()
    assert [r["empty"] for r in _data(spec)] == [False, True]
    texts = [n["mark"].get("text") for n in _walk(spec) if isinstance(n.get("mark"), dict)]
    assert "none" in texts
    assert X.transmission_rates_chart(rates.clear()).to_dict()["data"]["values"] == [
        {"text": "none"}
    ]


def test_drift_panel_of_an_absent_model_says_none(data):
    drift = A.behaviour_drift(data["t"], data["wr"])
    tests = A.drift_tests(data["t"], data["wr"])
    # a persona that only one condition has leaves the other conditions' panels empty
    only_urgent = drift.filter(
        (pl.col("model") != "price_first") | (pl.col("condition") == "urgent_worker")
    )
    spec = T.behaviour_drift_chart(only_urgent, tests).to_dict()
    empty = {(r["condition"], r["model"]) for r in _data(spec) if r.get("empty")}
    assert ("base", "price_first") in empty and _has_none_text(spec)


def test_mechanism_panels_share_each_measure_scale_across_conditions():
    out = pl.DataFrame(
        {
            "condition": ["a", "a", "b", "b"],
            "mechanism": ["negotiated", "fcfs", "negotiated", "fcfs"],
            "base_run": ["a-1", "a-1", "b-1", "b-1"],
            "deadline_miss": [0.1, 0.2, 0.5, 0.9],
            "progress": [0.9, 0.8, 0.5, 0.4],
        }
    )
    spec = M.outcome_comparison(out, ["deadline_miss", "progress"]).to_dict()
    assert len(spec["concat"]) == 2  # one block of panels per measure
    assert spec["resolve"] == {"scale": {"x": "independent"}}  # measures differ in units
    for column in spec["concat"]:  # conditions one above the other: one shared x scale
        assert "facet" in column and "resolve" not in column
    assert M.outcome_comparison(out.clear(), ["progress"]).to_dict()["data"]["values"] == [
        {"text": "none"}
    ]


def test_drift_over_hundreds_of_rounds_is_drawn_in_bins_with_weighted_prevalence():
    """Scripted negotiators waiting on LLM solvers run hundreds of rounds: the chart bins them
    (at most MAX_LEVELS points per line) instead of exceeding what a page holds."""
    import polars as pl

    from mbb.viz.taxonomy import MAX_LEVELS, _binned_levels, behaviour_drift_chart

    rounds = list(range(1, 401))
    drift = pl.DataFrame(
        {
            "condition": ["c"] * 400,
            "model": ["m"] * 400,
            "group": ["g"] * 400,
            "round": rounds,
            "worker_rounds": [1 if r % 2 else 3 for r in rounds],
            "prevalence": [1.0 if r % 2 else 0.0 for r in rounds],
        },
        schema_overrides={"worker_rounds": pl.UInt32},
    )
    binned, title = _binned_levels(drift, "round")
    assert binned.height == MAX_LEVELS and title == "Round (bins of 20)"
    assert binned["round"].to_list()[:2] == [1, 21]
    # each bin: 10 rounds of 1 worker-round present, 10 of 3 absent -> 10 / 40
    assert binned["prevalence"].to_list() == [0.25] * MAX_LEVELS
    assert binned["worker_rounds"].to_list() == [40] * MAX_LEVELS
    tests = pl.DataFrame(
        {
            "condition": ["c"],
            "model": ["m"],
            "group": ["g"],
            "chi2": [0.0],
            "dof": [0],
            "p_value": [1.0],
            "delta": [0.0],
        }
    )
    behaviour_drift_chart(drift, tests).to_dict()  # within altair's row limit
    few, title = _binned_levels(drift.filter(pl.col("round") <= 5), "round")
    assert few.height == 5 and title == "Round"


def test_the_token_chart_by_subrun_reads_in_subrun_order(data):
    """Its axis followed the data's order (1, 3, 2, 4 in a reviewer's notebook)."""
    audit = data["audit"].sort("subrun", descending=True)  # the data in the wrong order
    spec = K.token_audit_chart(audit, by="subrun").to_dict()
    sorts = [
        enc["x"]["sort"]
        for layer in spec["spec"]["layer"]
        if (enc := layer.get("encoding", {})).get("x", {}).get("field") == "subrun"
    ]
    subruns = sorted(audit["subrun"].unique().to_list())
    assert sorts and all(s == [str(x) for x in subruns] for s in sorts), sorts


def test_starting_state_means_carry_a_seed_interval(data):
    """Each starting-state mean is over seeds (one value per run) with its 95 % CI: the
    figures drew pooled means without one."""
    s = A.starting_state_seeds(data["t"])
    assert set(s["figure"]) == {"urgency", "rich_worker", "contested"}
    urgent = s.filter((pl.col("figure") == "urgency") & (pl.col("group") == "urgent"))
    assert urgent.height and (urgent["n"] == 2).all()  # two seeds of urgent_worker
    two = s.filter(pl.col("n") >= 2)
    assert two["ci_low"].is_not_null().all()
    assert (two["ci_low"] <= two["mean"] + 1e-12).all() and (
        two["mean"] <= two["ci_high"] + 1e-12
    ).all()
    spec = S.urgency_chart(s).to_dict()
    text = str(spec)
    assert "'ci_low'" in text and "'ci_high'" in text and "'seeds'" in text


def test_transmission_rates_carry_a_seed_interval(data):
    """The pooled rates come with the mean over seeds of each run's rate and its 95 % CI (the
    chart drew pooled shares without any interval)."""
    pooled = A.transmission_rates(data["t"], data["ev"])
    per_run = A.transmission_rates(data["t"], data["ev"], by="run_id")
    means = per_run.group_by("condition", "kind").agg(
        pl.col("transmission_rate").mean().alias("m"), pl.len().alias("k")
    )
    j = pooled.join(means, on=["condition", "kind"])
    assert j.height == pooled.height > 0
    assert (j["seeds"] == j["k"]).all()
    assert ((j["seed_mean_rate"] - j["m"]).abs() < 1e-12).all()
    two = j.filter(pl.col("seeds") >= 2)
    assert two["seed_mean_rate_ci_low"].is_not_null().all()

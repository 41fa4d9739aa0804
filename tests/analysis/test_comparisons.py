"""Comparisons over seeds: bootstrap CIs, effect sizes, condition differences, power; the
condition table; the rule and commitment readers; what instructions suggest; metagaming and the
reasoning-effort table."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from mbb.analysis import (
    bootstrap_ci,
    compare_samples,
    condition_differences,
    diff_bootstrap_ci,
    hedges_g,
    paired_bootstrap_ci,
    paired_effect_size,
    power_curve,
    seeds_for_power,
)
from mbb.analysis.rules import (
    commitment_sentence,
    gold_rule_detection,
    rule_signature,
    rule_statement,
)


def test_bootstrap_ci_covers_the_mean_and_narrows_with_n():
    rng = np.random.default_rng(0)
    x = rng.normal(5.0, 1.0, 200)
    lo, hi = bootstrap_ci(x)
    assert lo < x.mean() < hi
    # about 2 * 1.96 * sd / sqrt(n) wide
    assert (hi - lo) == pytest.approx(2 * 1.96 / np.sqrt(200), rel=0.15)
    lo5, hi5 = bootstrap_ci(x[:20])
    assert hi5 - lo5 > hi - lo
    assert bootstrap_ci([1.0, float("nan")]) is None  # one finite value: no interval
    assert bootstrap_ci([3.0, 3.0, 3.0]) == (3.0, 3.0)
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci(x, level=95)


def test_paired_ci_removes_what_the_seed_fixes():
    rng = np.random.default_rng(1)
    seed_effect = rng.normal(0, 5.0, 12)  # large between-seed spread (workload)
    base = seed_effect + rng.normal(0, 0.1, 12)
    treated = seed_effect + 0.5 + rng.normal(0, 0.1, 12)
    lo, hi = paired_bootstrap_ci(treated, base)
    assert 0.3 < lo < 0.5 < hi < 0.7
    ilo, ihi = diff_bootstrap_ci(treated, base)  # independent: the spread swamps the effect
    assert ilo < 0 < ihi
    assert paired_effect_size(treated, base) > 3
    with pytest.raises(ValueError, match="differ in length"):
        paired_bootstrap_ci([1.0, 2.0], [1.0])


def test_hedges_g_and_compare_samples():
    a, b = np.array([2.0, 3.0, 4.0]), np.array([0.0, 1.0, 2.0])
    # pooled sd 1, d = 2, small-sample factor 1 - 3 / (4 * 4 - 1) = 0.8
    assert hedges_g(a, b) == pytest.approx(1.6)
    assert np.isnan(hedges_g([1.0, 1.0], [1.0, 1.0]))
    r = compare_samples(a, b)
    assert (r["n_a"], r["n_b"], r["diff"], r["effect_size_kind"]) == (3, 3, 2.0, "hedges_g")
    assert r["ci_low"] <= 2.0 <= r["ci_high"]
    same = compare_samples([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], paired=True)
    assert same["diff"] == 0.0 and not same["excludes_zero"] and same["effect_size"] is None
    one = compare_samples([1.0], [5.0])  # one seed a side: no interval, so no verdict
    assert one["diff"] == -4.0 and one["ci_low"] is None and one["excludes_zero"] is None


def test_condition_differences_pairs_shared_seeds():
    per = pl.DataFrame(
        {
            "condition": ["base"] * 4 + ["treated"] * 4 + ["other"] * 3,
            "seed": [0, 1, 2, 3, 0, 1, 2, 3, 10, 11, 12],
            "m": [1.0, 5.0, 9.0, 3.0, 2.0, 6.0, 10.0, 4.0, 4.0, 5.0, 6.0],
        }
    )
    d = {r["condition"]: r for r in condition_differences(per, ["m"], "base").iter_rows(named=True)}
    t = d["treated"]
    assert t["paired"] and t["diff"] == 1.0 and t["ci_low"] == t["ci_high"] == 1.0
    assert t["n"] == t["n_baseline"] == 4
    o = d["other"]  # other seeds: independent resampling, Hedges' g
    assert not o["paired"] and o["effect_size_kind"] == "hedges_g" and o["n"] == 3
    dup = per.with_columns(pl.lit(0).alias("seed"))  # every run "seed 0": nothing to pair
    assert not condition_differences(dup, ["m"], "base")["paired"].any()
    with pytest.raises(ValueError, match="no runs of the baseline"):
        condition_differences(per, ["m"], "nope")
    with pytest.raises(ValueError, match="no column 'x'"):
        condition_differences(per, ["x"], "base")


def test_seeds_for_power_matches_the_normal_approximation():
    pilot = np.random.default_rng(2).normal(0, 1.0, 400)
    # two-sample, d = 1, 80 % power at alpha 0.05: about 16-17 seeds per condition
    n = seeds_for_power(pilot, 1.0, n_sim=200, n_resamples=300)
    assert n is not None and 12 <= n <= 22
    curve = dict(power_curve(pilot, 1.0, [4, 30], n_sim=200, n_resamples=300))
    assert curve[4] < 0.5 < 0.9 < curve[30]
    # a tiny effect is out of reach within the cap
    assert seeds_for_power(pilot, 0.01, max_seeds=16, n_sim=50, n_resamples=200) is None
    with pytest.raises(ValueError, match="non-zero"):
        seeds_for_power(pilot, 0.0)


def test_rule_statements_any_rule_and_their_roles():
    assert rule_statement("From now on, ties go to whoever released early last round.") == (
        "standing",
        "From now on, ties go to whoever released early last round.",
    )
    kind, _ = rule_statement("Per the alternation we agreed, W3 leads this round.")
    assert kind == "reference"
    # allocation wording is required; the operator's own mechanism is not an agent's rule
    assert rule_statement("From now on I will write shorter notes.") is None
    assert rule_statement("The operator's rule orders by bid; ties by queue order.") is None
    assert rule_statement("I don't want a standing rule here, just this round's order.") is None
    # two phrasings of one rule share a signature's distinctive concept; a cap does not
    a = rule_signature("Going forward we alternate who takes slot 1.")
    b = rule_signature("Rotation continues: your turn for the first window.")
    c = rule_signature("No window longer than 180 s for the rest of the run.")
    assert "TURN" in a & b and "TURN" not in c and "CAP" in c


def test_forward_scoped_commitments():
    assert commitment_sentence("I'll take second now if you rank me first next round.")
    assert commitment_sentence("Deal. In a later subrun I back you at the first tie.")
    # a commitment for this round only, or a future remark without a commitment: neither
    assert commitment_sentence("I'll take second this round.") is None
    assert commitment_sentence("The next round will probably be crowded.") is None


def test_rule_and_commitment_frames_read_each_utterance_like_the_sentence_readers():
    # the frame readers read each distinct text once; a text repeated across runs and rounds
    # must still give one row per utterance, in every run, as reading them one by one does
    from mbb.analysis.rules import forward_commitments, rule_statements

    texts = [
        "From now on, ties go to whoever released early last round.",
        "Per the alternation we agreed, W3 leads this round.",
        "I'll take second now if you rank me first next round.",
        "Bid 12 for 90 s.",
        None,
    ]
    common = {"subrun": pl.Int64, "round": pl.Int64, "worker": pl.String}
    rows = [
        (run, 10 * r + i, 1, r, f"W{i + 1}", text)
        for run in ("base-seed0000", "base-seed0001")
        for r in (1, 2)
        for i, text in enumerate(texts)
    ]
    decl = pl.DataFrame(
        [(run, seq, sub, rnd, w, 1, text, []) for run, seq, sub, rnd, w, text in rows],
        schema={
            "run_id": pl.String,
            "seq": pl.Int64,
            **common,
            "turn": pl.Int64,
            "note": pl.String,
            "labels": pl.List(pl.String),
        },
        orient="row",
    )
    empty_msgs = pl.DataFrame(
        schema={
            "run_id": pl.String,
            "seq": pl.Int64,
            **common,
            "turn": pl.Int64,
            "to": pl.String,
            "text": pl.String,
            "labels": pl.List(pl.String),
        }
    )
    empty_ballots = pl.DataFrame(
        schema={
            "run_id": pl.String,
            "seq": pl.Int64,
            **common,
            "reasoning": pl.String,
            "labels": pl.List(pl.String),
        }
    )
    tables = {"declarations": decl, "messages": empty_msgs, "ballots": empty_ballots}
    st = rule_statements(tables)
    expected = [
        (run, seq, found[1])
        for run, seq, _, _, _, text in rows
        if (found := rule_statement(text or "")) is not None
    ]
    assert len(expected) == 8  # two statements, two rounds, two runs
    assert sorted(st.select("run_id", "seq", "sentence").rows()) == sorted(expected)
    # the same rule in both rounds of a run: made in round 1, cited in round 2, in each run
    assert st.filter(pl.col("round") == 2)["role"].to_list() == ["citation"] * 4
    fc = forward_commitments(tables)
    expected_fc = [
        (run, seq, found)
        for run, seq, _, _, _, text in rows
        if (found := commitment_sentence(text or "")) is not None
    ]
    assert len(expected_fc) >= 4
    assert fc.select("run_id", "seq", "sentence").rows() == sorted(expected_fc)


def test_gold_rule_detection_on_the_dev_split(tmp_path):
    # the rule cues were written from the first round's dev writers (A, C-E, G-J); the second
    # round's (K-P) joined dev later, so the check of the cues on their own items reads those
    from mbb.analysis.gold_eval import GOLD_DIR

    lines = (GOLD_DIR / "dev.jsonl").read_text().splitlines(keepends=True)
    first = [x for x in lines if json.loads(x)["writer"] in set("ACDEGHIJ")]
    (tmp_path / "dev1.jsonl").write_text("".join(first))
    t = {
        r["metric"]: r
        for r in gold_rule_detection(tmp_path / "dev1.jsonl", n_boot=200).iter_rows(named=True)
    }
    assert t["recall"]["support"] == 82
    assert t["recall"]["value"] > 0.9 and t["precision"]["value"] > 0.45
    assert t["f1"]["ci_low"] < t["f1"]["value"] < t["f1"]["ci_high"]
    with pytest.raises(ValueError, match="split"):
        gold_rule_detection(split="train")


def test_condition_table_reports_n_ci_and_paired_differences(events):
    from mbb.analysis.compare import OUTCOME_MEASURES, condition_table, run_table

    from .synthetic import Knobs, synthetic_run

    Log, tables_of = events
    rng = np.random.default_rng(3)
    logs = [
        synthetic_run(Log, f"{c}-seed{i:04d}", Knobs(), rng)
        for c in ("base", "x")
        for i in range(3)
    ]
    t = tables_of(*logs)
    # the synthetic runs carry no evaluations or payments; give every run the same ones
    evals = t["declarations"].select("run_id", "subrun", "worker").unique()
    t = {
        **t,
        "evaluations": evals.with_columns(
            pl.lit("completed").alias("outcome"),
            pl.when(pl.col("run_id").str.starts_with("x"))
            .then(0.9)
            .otherwise(0.5)
            .alias("progress"),
            pl.lit(1.0).alias("score"),
            pl.lit(True).alias("resolved"),
        ),
    }
    t = {
        k: v.with_columns(pl.col("run_id").str.replace(r"-seed.*", "").alias("condition"))
        if "run_id" in v.columns
        else v
        for k, v in t.items()
    }
    ct = condition_table(t, n_resamples=200)
    # no LLM call in these runs: no cost row (it read "$0 [$0, $0]" for scripted runs)
    assert set(ct["measure"]) == set(OUTCOME_MEASURES) - {"cost_per_run_usd"}
    assert set(ct["condition"]) == {"base", "x"}
    row = ct.filter((pl.col("condition") == "x") & (pl.col("measure") == "progress")).row(
        0, named=True
    )
    assert row["n"] == 3 and row["paired"] and row["diff"] == pytest.approx(0.4)
    assert row["excludes_zero"] and row["baseline"] == "base"
    assert ct.filter(pl.col("condition") == "base")["diff"].is_null().all()
    assert set(ct.filter(pl.col("condition") == "base")["note"]) == {"baseline"}
    x_rows = ct.filter(pl.col("condition") == "x")
    assert x_rows.filter(pl.col("effect_size").is_not_null())["note"].is_null().all()
    with pytest.raises(ValueError, match="not among the conditions"):
        condition_table(t, "missing")
    # a measure only one side has values for: no difference, said why, no pairing claimed
    runs = run_table(t, OUTCOME_MEASURES).select("condition", "run_id", "seed")
    is_x = pl.col("condition") == "x"
    per_run = runs.with_columns(
        pl.when(is_x).then(None).otherwise(1.0).alias("only_base"),
        pl.when(is_x).then(1.0).otherwise(None).alias("only_x"),
    )
    ct = condition_table(t, per_run=per_run, n_resamples=50)
    for measure, note in (
        ("only_base", "no difference: no seed has a value"),
        ("only_x", "no difference: no seed of base has a value"),
    ):
        row = ct.filter(is_x & (pl.col("measure") == measure)).row(0, named=True)
        assert row["note"] == note and row["diff"] is None
        assert row["paired"] is None and row["excludes_zero"] is None
    # a seed whose value is n/a is counted as n/a: neither a seed with a value nor dropped
    n = {(r["condition"], r["measure"]): (r["n"], r["n_na"]) for r in ct.iter_rows(named=True)}
    assert n[("x", "only_base")] == (0, 3) and n[("base", "only_base")] == (3, 0)
    assert n[("x", "only_x")] == (3, 0) and n[("x", "progress")] == (3, 0)


def test_condition_table_says_why_an_effect_size_is_missing(events):
    """An effect size that cannot be computed says why in `note` (it read n/a with a blank
    note): 0 in every seed of both conditions, or a difference without spread."""
    from mbb.analysis.compare import condition_table, run_table

    from .synthetic import Knobs, synthetic_run

    Log, tables_of = events
    rng = np.random.default_rng(3)
    t = tables_of(
        *(
            synthetic_run(Log, f"{c}-seed{i:04d}", Knobs(), rng)
            for c in ("base", "x")
            for i in range(3)
        )
    )
    evals = t["declarations"].select("run_id", "subrun", "worker").unique()
    t = {
        **t,
        "evaluations": evals.with_columns(
            pl.lit("completed").alias("outcome"),
            pl.lit(0.5).alias("progress"),
            pl.lit(1.0).alias("score"),
            pl.lit(True).alias("resolved"),
        ),
    }
    t = {
        k: v.with_columns(pl.col("run_id").str.replace(r"-seed.*", "").alias("condition"))
        if "run_id" in v.columns
        else v
        for k, v in t.items()
    }
    runs = run_table(t, ["mean_bid"]).select("condition", "run_id", "seed")
    is_x = pl.col("condition") == "x"
    per_run = runs.with_columns(
        pl.lit(0.0).alias("never"),
        pl.when(is_x).then(pl.col("seed") + 2.0).otherwise(pl.col("seed") * 1.0).alias("shifted"),
    )
    ct = condition_table(t, measures=["mean_bid"], per_run=per_run, n_resamples=50)
    never = ct.filter(is_x & (pl.col("measure") == "never")).row(0, named=True)
    assert never["effect_size"] is None
    assert never["note"] == "0 in every seed here and under base: nothing to compare"
    shifted = ct.filter(is_x & (pl.col("measure") == "shifted")).row(0, named=True)
    assert shifted["diff"] == pytest.approx(2.0) and shifted["effect_size"] is None
    assert shifted["note"].startswith("no effect size: the difference is the same in every seed")


def test_metagaming_and_reasoning_effort_tables(events):
    from mbb.analysis import (
        classify_evidence,
        metagaming,
        reasoning_effort_table,
        worker_round_predictions,
    )

    from .synthetic import Knobs, synthetic_run

    Log, tables_of = events
    rng = np.random.default_rng(4)
    logs = [
        synthetic_run(Log, f"reasoning_high-seed{i:04d}", Knobs(meta=0.5), rng) for i in range(2)
    ]
    logs += [synthetic_run(Log, f"reasoning_low-seed{i:04d}", Knobs(), rng) for i in range(2)]
    t = tables_of(*logs)
    ev = classify_evidence(t)
    mg = {r["condition"]: r for r in metagaming(t, ev).iter_rows(named=True)}
    assert mg["reasoning_high"]["share"] > 0.2 and mg["reasoning_low"]["share"] < 0.05
    assert mg["reasoning_high"]["runs_with"] == 2 and len(mg["reasoning_high"]["examples"]) == 3
    r9 = reasoning_effort_table(t, worker_round_predictions(ev))
    assert set(r9["effort"]) == {"high", "low"}
    assert set(r9["group"]) >= {"price_primary", "scope_reduction", "relational", "coalition"}
    assert r9["reasoning_tokens_per_call"].is_null().all()  # scripted: no LLM calls
    named = reasoning_effort_table(
        t, worker_round_predictions(ev), effort_of={"reasoning_low": "x"}
    )
    assert set(named["effort"]) == {"x", "unset"}


def test_instructions_are_rendered_by_the_prompt_builder():
    from mbb.analysis.instructions import condition_instructions
    from mbb.batch.build import load_params

    text = condition_instructions(load_params("fixed_bids"))
    assert "Declarations are final once made" in text  # the fixed-bids condition's own rule
    assert "declarations cannot be revised in this condition" in text  # its answer's field
    assert "trade concessions" not in text and "remembered by others" not in text
    solver = condition_instructions(load_params("fixed_bids"), "solver")
    assert "How you get windows" in solver and "completion claim" in solver

"""The token audit chart compares conditions: each bar's mean and CI are over the runs of one
condition (its seeds), never over the runs of all conditions pooled as if they were seeds."""

from __future__ import annotations

from typing import Any

import polars as pl

from mbb.viz import tokens as K


def _audit() -> pl.DataFrame:
    """Two conditions of two runs each, one worker: base spends 100 and 120 tokens per run,
    chatty 300 and 340; the solver role only in chatty."""
    rows = [
        ("base", "base-seed0001", "negotiator", 100),
        ("base", "base-seed0002", "negotiator", 120),
        ("chatty", "chatty-seed0001", "negotiator", 300),
        ("chatty", "chatty-seed0002", "negotiator", 340),
        ("chatty", "chatty-seed0001", "solver", 1000),
    ]
    return pl.DataFrame(
        rows, schema=["condition", "run_id", "role", "total_tokens"], orient="row"
    ).with_columns(
        pl.lit("W1").alias("worker"),
        pl.lit("scripted").alias("model"),
        pl.lit("conversation").alias("phase"),
        pl.lit(1, pl.Int64).alias("subrun"),
        pl.lit(1, pl.Int64).alias("calls"),
        pl.lit(None, pl.Float64).alias("cost_usd"),
        pl.lit(True).alias("approximate"),
    )


def _rows(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for rows in spec["datasets"].values() for r in rows]


def test_token_totals_are_per_condition_over_its_seeds():
    spec = K.token_audit_chart(_audit()).to_dict()
    totals = {
        (r["condition"], r["role"]): (r["mean"], r["n"])
        for r in _rows(spec)
        if r["kind"] == "total"
    }
    assert totals[("base", "negotiator")] == (110.0, 2)  # two seeds of base, not four runs
    assert totals[("chatty", "negotiator")] == (320.0, 2)
    # chatty's second run had no solver call: it counts 0 there; base has no solver at all
    assert totals[("chatty", "solver")] == (500.0, 2)
    assert ("base", "solver") not in totals
    bars = {
        (r["condition"], r["role"]): r["tokens_per_run"] for r in _rows(spec) if r["kind"] == "bar"
    }
    assert bars[("base", "negotiator")] == 110.0 and bars[("chatty", "negotiator")] == 320.0
    assert "per condition (2 condition(s), 4 run(s))" in spec["title"]["text"]
    # one row of panels per role, each its own y scale shared by its conditions
    assert spec["resolve"]["scale"]["y"] == "independent"
    assert [c["facet"]["field"] for c in spec["vconcat"]] == ["condition"] * 2


def test_a_study_of_many_cells_wraps_its_panels():
    """The paper's design has 72 cells: one panel per cell in one row was ~14,000 px wide."""
    audit = pl.concat(
        [
            _audit().with_columns(pl.format("{}-{}", "condition", pl.lit(i)).alias("condition"))
            for i in range(9)
        ]
    ).with_columns(pl.format("{}/{}", "condition", "run_id").alias("run_id"))
    spec = K.token_audit_chart(audit).to_dict()
    assert all(c["columns"] == 4 for c in spec["vconcat"])


def test_by_model_is_per_seat_and_says_so():
    """rule_makers' one 'rule_maker' bar pooled its five seats (~5,300 tokens per run) beside
    one-seat persona bars (~1,500) on one scale, reading as 3.5x the spend (M5): by model, a
    bar is per run and seat, the axes say so and the subtitle names the seats pooled."""
    one = _audit().filter(pl.col("role") == "negotiator")
    five = pl.concat(
        [
            one.filter(pl.col("condition") == "base").with_columns(
                pl.lit(f"W{i}").alias("worker"),
                pl.lit("rule_maker").alias("model"),
                pl.lit("rule_makers").alias("condition"),
                pl.col("run_id").str.replace("base", "rule_makers"),
            )
            for i in range(1, 6)
        ]
    )
    spec = K.token_audit_chart(pl.concat([one, five]), by="model").to_dict()
    totals = {r["condition"]: r["mean"] for r in _rows(spec) if r.get("kind") == "total"}
    assert totals["rule_makers"] == totals["base"] == 110  # per seat: (100 + 120) / 2
    text = str(spec)
    assert "Model / persona" in text and "Tokens per run and seat" in text
    assert "rule_maker: 5 seats" in " ".join(spec["title"]["subtitle"])

"""The transmission-rate chart draws each bar's 95 % CI over seeds and says the seeds; a bar of
one seed says it has no interval."""

from __future__ import annotations

from typing import Any

import polars as pl

from mbb.viz import transmission as X


def _rates(seeds: tuple[int, int] = (4, 4)) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "condition": ["base", "memory_off"],
            "memory": [True, False],
            "kind": ["rule", "rule"],
            "institutions": [8, 6],
            "cited_next_subrun": [4, 1],
            "transmission_rate": [0.5, 1 / 6],
            "seeds": list(seeds),
            "seed_mean_rate": [0.45, 0.2],
            "seed_mean_rate_ci_low": [0.3 if seeds[0] > 1 else None, 0.0 if seeds[1] > 1 else None],
            "seed_mean_rate_ci_high": [
                0.6 if seeds[0] > 1 else None,
                0.4 if seeds[1] > 1 else None,
            ],
            "mean_rounds_to_first_citation": [1.0, 2.0],
        }
    )


def _walk(spec: Any) -> list[dict[str, Any]]:
    out = []
    if isinstance(spec, dict):
        out.append(spec)
        for v in spec.values():
            out += _walk(v)
    elif isinstance(spec, list):
        for v in spec:
            out += _walk(v)
    return out


def test_bars_carry_their_seed_interval():
    spec = X.transmission_rates_chart(_rates()).to_dict()
    y2 = [n["encoding"]["y2"]["field"] for n in _walk(spec) if "y2" in n.get("encoding", {})]
    assert y2 == ["seed_mean_rate_ci_high"]
    ys = {n["encoding"]["y"].get("field") for n in _walk(spec) if "y" in n.get("encoding", {})}
    assert "seed_mean_rate" in ys
    tips = {
        t.get("title") for n in _walk(spec) for t in n.get("tooltip", []) if isinstance(t, dict)
    }
    assert "seeds" in tips
    assert any("95% CI" in line for line in spec["title"]["subtitle"])


def test_a_bar_of_one_seed_says_it_has_no_interval():
    spec = X.transmission_rates_chart(_rates((4, 1))).to_dict()
    rows = [r for v in spec["datasets"].values() for r in v]
    assert [r["interval"] for r in rows] == ["95% CI over seeds", "no interval (1 seed)"]
    assert "no interval (1 seed) for 1 of 2 bars" in spec["title"]["subtitle"]


def _flags() -> pl.DataFrame:
    """`stage_flags` rows: commitments of runs a and b (condition base) in subrun 1; run c
    (base too) had none."""
    flags = pl.DataFrame(
        {
            "run_id": ["a", "a", "b"],
            "condition": ["base"] * 3,
            "kind": ["commitment"] * 3,
            "subrun": [1, 1, 1],
        }
    )
    return flags.with_columns(
        pl.lit(True).alias("proposed"),
        *(pl.lit(False).alias(c) for c in X.CATEGORIES[1:]),
    )


def _runs(*ids: str) -> pl.DataFrame:
    return pl.DataFrame({"run_id": list(ids), "condition": ["base"] * len(ids)})


def test_lifecycle_counts_carry_a_ci_over_runs():
    from mbb.analysis.stats import bootstrap_ci

    counts = X.stage_counts(_flags(), _runs("a", "b", "c"))
    proposed = counts.filter(pl.col("stage") == "proposed").row(0, named=True)
    assert proposed["per_run"] == 1.0
    lo, hi = bootstrap_ci([2.0, 1.0, 0.0])  # run c proposed none: it counts 0
    assert (proposed["per_run_ci_low"], proposed["per_run_ci_high"]) == (lo, hi)
    one = X.stage_counts(_flags().filter(pl.col("run_id") == "a"), _runs("a"))
    assert one["per_run_ci_low"].is_null().all()  # one run: no interval


def test_lifecycle_bars_draw_their_whiskers():
    rules = pl.DataFrame(
        {"run_id": ["a", "a", "b"], "subrun": [1, 1, 1], "accepted": [False, False, True]}
    ).with_columns(pl.lit(0).alias("citing_rounds"), pl.lit("open").alias("status"))
    commits = rules.head(0).rename({"citing_rounds": "claim_round"})
    spec = X.transmission_stages(rules, commits, runs=_runs("a", "b", "c")).to_dict()
    x2 = [n["encoding"]["x2"]["field"] for n in _walk(spec) if "x2" in n.get("encoding", {})]
    assert x2 == ["per_run_ci_high"]
    rows = [r for v in spec["datasets"].values() for r in v]
    assert {r.get("interval") for r in rows if not r.get("empty")} == {
        "95% CI over the condition's 3 runs"
    }


def test_lifecycle_subtitle_says_honoured_and_broken_are_siblings():
    # "each is a subset of the one above" where broken sits below honoured, its sibling (L1)
    rules = pl.DataFrame(
        {"run_id": ["a"], "subrun": [1], "accepted": [True], "citing_rounds": [1]}
    ).with_columns(pl.lit("honoured").alias("status"))
    commits = rules.head(0).rename({"citing_rounds": "claim_round"})
    spec = X.transmission_stages(rules, commits, runs=_runs("a")).to_dict()
    subtitle = " ".join(spec["title"]["subtitle"])
    assert "subset of the one above" not in subtitle
    assert "honoured or broken: two outcomes of a cited item" in subtitle


def test_a_condition_without_messages_is_na_not_zero_and_draws_no_zeros():
    """conversation_off and mech_fcfs send no message, so they cannot propose or accept: the
    lifecycle drew them as rows of 0 (M2); they are n/a with the reason, named in the subtitle.
    A bar of 0 carries no number (stacks of "0 0 0 0" hid the counts that were not 0; M4)."""
    runs = pl.concat([_runs("a", "b"), pl.DataFrame({"run_id": ["q"], "condition": ["quiet"]})])
    counts = X.stage_counts(_flags(), runs, talked=["a", "b"])
    quiet = counts.filter(pl.col("condition") == "quiet")
    assert quiet.height and quiet["per_run"].is_null().all() and quiet["n"].is_null().all()
    assert quiet["per_run_why"].str.contains("no messages").all()
    assert counts.filter(pl.col("condition") != "quiet")["per_run_why"].is_null().all()
    rules = pl.DataFrame(
        {"run_id": ["a"], "subrun": [1], "accepted": [True], "citing_rounds": [1]}
    ).with_columns(pl.lit("honoured").alias("status"))
    commits = rules.head(0).rename({"citing_rounds": "claim_round"})
    spec = X.transmission_stages(rules, commits, runs=runs, talked=["a", "b"]).to_dict()
    assert "nothing to propose or accept): quiet (1 runs)" in " ".join(spec["title"]["subtitle"])
    texts = [m for m in _marks(spec) if m.get("mark", {}).get("type") == "text"]
    numbers = [m for m in texts if m.get("encoding", {}).get("text", {}).get("field") == "per_run"]
    assert numbers and all(m["mark"]["fontSize"] >= 11 for m in numbers)
    assert all("datum.per_run > 0" in str(m.get("transform")) for m in numbers), "a 0 is labelled"
    assert not [r for r in _data(spec) if r.get("condition") == "quiet"]


def _marks(spec):
    from helpers import spec_values

    return [layer for layers in spec_values(spec, "layer") for layer in layers]


def _data(spec):
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def test_a_condition_alone_without_messages_says_na():
    """run_condition on conversation_off: nothing proposed anywhere, so no counts to mark n/a;
    the chart still names it (it read 'none' in every panel, as if nothing happened to be
    proposed)."""
    rules = pl.DataFrame(
        schema={"run_id": pl.String, "subrun": pl.Int64, "accepted": pl.Boolean,
                "citing_rounds": pl.Int64, "status": pl.String}
    )  # fmt: skip
    commits = rules.rename({"citing_rounds": "claim_round"})
    runs = pl.DataFrame({"run_id": ["q"], "condition": ["quiet"]})
    spec = X.transmission_stages(rules, commits, runs=runs, subruns=[1, 2], talked=[]).to_dict()
    assert "nothing to propose or accept): quiet (1 runs)" in " ".join(spec["title"]["subtitle"])
    alone = X.transmission_stages(rules, commits, runs=runs, talked=[]).to_dict()
    assert "n/a: no messages" in str(alone)

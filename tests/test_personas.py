"""Scripted personas: recognisable strategies, ground-truth labels, memory-dependent debts."""

from __future__ import annotations

import polars as pl
import pytest

from mbb.agents.personas import PERSONAS
from mbb.analysis import with_run_info
from mbb.batch.build import load_params
from mbb.batch.runner import run_many
from mbb.core.taxonomy import CATEGORY_NAMES

EXPECTED = {  # labels each persona must enact somewhere in a handful of runs
    "price_first": {"price_primary", "anchoring", "cheap_talk"},
    "deadline_advocate": {"earliest_deadline_first", "risk_variance"},
    "reciprocator": {"reciprocity"},
    "coalition_builder": {
        "coalition_formation",
        "rival_targeting",
        "coalition_loyalty",
        "social_proof",
    },
    "shortest_job_advocate": {"shortest_job_first", "downstream_gating"},
    "quitter": {"welfare_concession", "scope_reduction"},
    "rule_maker": {"rule_making_citation"},
}


@pytest.fixture(scope="module")
def all_personas(root):
    cond = load_params(
        root / "params" / "base.yaml",
        {
            "name": "personas",
            # the paper's fixed seating: the tests below read W1 as price_first
            "workers": {"count": 7, "personas": list(PERSONAS.names()), "seating": "fixed"},
            "deadline": {"minutes": 12},
            "tasks": {"load": None},  # the catalogue's work: 7 workers overload 12 minutes
        },
    )
    b = run_many(cond, runs=6, processes=1).check()
    return with_run_info(b.tables, by_kind=b.by_kind)


def _labels_by_persona(tables) -> dict[str, set[str]]:
    """Labels by the persona each run seated in each worker (seating rotates by seed)."""
    personas = {
        (r, w): p for r, w, p in tables["workers"].select("run_id", "worker", "persona").iter_rows()
    }
    out: dict[str, set[str]] = {p: set() for p in PERSONAS.names()}
    for name in ("messages", "declarations", "ballots"):
        df = tables[name].select("run_id", "worker", "labels").explode("labels").drop_nulls()
        for r, w, lab in df.iter_rows():
            out[personas[r, w]].add(lab)
    return out


def test_every_label_is_a_taxonomy_category(all_personas):
    seen = set().union(*_labels_by_persona(all_personas).values())
    assert seen <= set(CATEGORY_NAMES), seen - set(CATEGORY_NAMES)


@pytest.mark.parametrize("persona", PERSONAS.names())
def test_persona_enacts_its_strategy(all_personas, persona):
    assert EXPECTED[persona] <= _labels_by_persona(all_personas)[persona]


def test_price_first_ballots_follow_bids(all_personas):
    t = all_personas
    last = t["declarations"].sort("seq").group_by("run_id", "subrun", "round", "worker").last()
    # W1 is price_first; a ballot that returns a favour (labelled reciprocity) moves one peer
    ballots = t["ballots"].filter(
        (pl.col("worker") == "W1") & ~pl.col("labels").list.contains("reciprocity")
    )
    checked = 0
    for row in ballots.iter_rows(named=True):
        bids = last.filter(
            (pl.col("run_id") == row["run_id"])
            & (pl.col("subrun") == row["subrun"])
            & (pl.col("round") == row["round"])
        )
        bid = dict(bids.select("worker", "bid").iter_rows())
        ranked = [bid[w] for w in row["ranking"]]
        assert ranked == sorted(ranked, reverse=True)
        checked += 1
    assert checked > 10


def test_reciprocator_debts_carry_across_subruns_only_with_memory(root):
    def claims_in_later_subruns(memory: bool) -> int:
        cond = load_params(
            root / "params" / "base.yaml", {"memory": {"enabled": memory}, "name": f"mem{memory}"}
        )
        b = run_many(cond, runs=12, processes=1).check()
        t = with_run_info(b.tables, by_kind=b.by_kind)
        recip = t["workers"].filter(pl.col("persona") == "reciprocator").select("run_id", "worker")
        m = t["messages"].join(recip, on=["run_id", "worker"])  # its seat rotates with the seed
        m = m.explode("intents").drop_nulls("intents")
        m = m.filter(pl.col("intents").struct.field("kind") == "claim_debt")
        # a claim in round 1 of a subrun > 1 can only come from a debt remembered via scratch
        return m.filter((pl.col("subrun") > 1) & (pl.col("round") == 1)).height

    assert claims_in_later_subruns(True) > 0
    assert claims_in_later_subruns(False) == 0


# --- behaviour knobs --------------------------------------------------------------------------
def _intent_rows(tables, name: str, kind: str) -> pl.DataFrame:
    t = tables[name].explode("intents").drop_nulls("intents")
    return t.filter(pl.col("intents").struct.field("kind") == kind)


def test_a_workers_knobs_override_only_what_they_name(root):
    cond = load_params(
        root / "params" / "base.yaml",
        {
            "workers": {
                "behaviour": {"urgency_premium": False},
                "overrides": {"W2": {"behaviour": {"honour_rate": 0.5}}},
            }
        },
    )
    w1, w2 = cond.worker_specs(0)[:2]
    assert (w1.behaviour.urgency_premium, w1.behaviour.honour_rate) == (False, 1.0)
    assert (w2.behaviour.urgency_premium, w2.behaviour.honour_rate) == (False, 0.5)


@pytest.mark.parametrize("memory", [True, False])
def test_rule_makers_relying_on_memory_restate_only_what_they_remember(root, memory):
    name = "rule_makers" if memory else "rule_makers_memory_off"
    t = run_many(load_params(root / "params" / f"{name}.yaml"), runs=3, processes=1).check().tables
    proposed = _intent_rows(t, "messages", "propose_rule")
    cited_later = _intent_rows(t, "messages", "cite_rule").filter(pl.col("subrun") > 1)
    assert set(proposed["subrun"]) == {1}  # each proposes once, in its first subrun
    if memory:
        assert set(cited_later["subrun"]) == {2, 3, 4}  # and cites it from scratch afterwards
    else:
        assert cited_later.height == 0  # memory wiped: the rule is gone
        later = t["ballots"].filter(pl.col("subrun") > 1)
        assert not later["labels"].list.contains("rule_making_citation").any()


def test_rule_makers_that_rederive_restate_the_same_rule_every_subrun(root):
    cond = load_params(
        root / "params" / "rule_makers_memory_off.yaml",
        {"workers": {"behaviour": {"rule_recall": "rederive"}}},
    )
    t = run_many(cond, runs=2, processes=1).check().tables
    p = _intent_rows(t, "messages", "propose_rule").with_columns(
        pl.col("intents").struct.field("rule").alias("rule")
    )
    assert set(p["subrun"]) == {1, 2, 3, 4}
    assert p.group_by("run_id", "worker").agg(pl.col("rule").n_unique())["rule"].max() == 1


def test_honour_rate_zero_breaks_every_debt(root):
    def honoured(rate: float) -> int:
        cond = load_params(
            root / "params" / "base.yaml",
            {"name": f"honour{int(rate)}", "workers": {"behaviour": {"honour_rate": rate}}},
        )
        t = run_many(cond, runs=6, processes=1).check().tables
        return _intent_rows(t, "ballots", "honour_commitment").height

    assert honoured(1.0) > 0
    assert honoured(0.0) == 0

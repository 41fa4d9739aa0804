"""The LLM classifier against fakes: batching, caching, checking, audit rows, and kappa
against the evidence classifier."""

from __future__ import annotations

import asyncio
import json
import math

import polars as pl
import pytest

from mbb.analysis import (
    LLMClassifier,
    kappa_table,
    response_schema,
    system_prompt,
    utterance_predictions,
    utterances,
)
from mbb.core.taxonomy import ALL_LABELS
from mbb.testing.fake_llm import FakeLLM


def test_prompt_and_schema_name_every_category():
    p = system_prompt()
    assert all(f"- {c}:" in p for c in ALL_LABELS)
    assert p.count("Includes:") == p.count("Excludes:") == p.count("Example:") == 24
    enum = response_schema()["properties"]["items"]["items"]["properties"]["labels"]["items"]
    assert enum["properties"]["category"]["enum"] == list(ALL_LABELS)


# the hand-made scenario's intended labels, by seq: what FakeLLM answers from (by text)
SCEN_LABELS = {
    3: ["price_primary"],
    6: ["earliest_deadline_first", "rule_making_citation"],
    7: ["reciprocity"],
    8: ["reciprocity"],
    9: ["price_primary"],
    10: ["earliest_deadline_first"],
    11: ["price_primary", "reciprocity"],
    25: ["price_primary"],
    26: ["reciprocity"],
    27: ["reciprocity", "reputation"],
    28: ["price_primary", "reciprocity", "coalition_loyalty"],
    29: ["price_primary"],
    34: ["price_primary"],
    36: ["price_primary"],
    37: ["price_primary"],
}


def oracle(scen):
    """Text -> intended labels (FakeLLM never sees the evidence cues)."""
    u = utterances(scen)
    return {t: SCEN_LABELS.get(s, []) for s, t in u.select("seq", "text").iter_rows()}


def test_batches_cache_and_labels(scen):
    fake = FakeLLM(oracle(scen))
    clf = LLMClassifier(fake, model="fake", batch_size=4)
    u = utterances(scen)
    out = clf.classify_sync(u)
    distinct = u.select("source", "text").unique().height
    assert distinct == 17  # the ballot reasoning "By bid." repeats
    assert [c["n_items"] for c in fake.calls] == [4, 4, 4, 4, 1]
    assert all(c["role"] == "classifier" for c in fake.calls)
    assert clf.cache_hits == 1
    # every utterance row gets its labels, repeated texts included
    by_seq = {s: set(g["category"]) for (s,), g in out.group_by("seq")}
    assert by_seq == {s: set(v) for s, v in SCEN_LABELS.items()}  # repeated texts included
    assert out["quote_in_text"].all()
    # a second pass is served from the cache: no new calls
    again = clf.classify_sync(u)
    assert len(fake.calls) == 5 and again.equals(out)
    usage = clf.usage_table()
    assert usage.height == 5 and usage["role"].unique().to_list() == ["classifier"]
    assert not usage["approximate"].any()


def test_cache_file_round_trip(scen, tmp_path):
    path = tmp_path / "cache.json"
    u = utterances(scen)
    LLMClassifier(FakeLLM(oracle(scen)), cache=path).classify_sync(u)
    assert len(json.loads(path.read_text())) == 17
    fake = FakeLLM()
    LLMClassifier(fake, cache=path).classify_sync(u)
    assert fake.calls == []


def test_bad_replies_are_reported_not_swallowed(scen):
    """An item left out of the reply, or answered with a category that is not one, is a
    problem and stays unanswered (not cached, so asked again): never "no label", and never
    half an answer. A quote not in the text is kept and flagged."""

    async def bad(messages, schema, *, role):
        items = json.loads(messages[-1]["content"])["items"]
        anchoring = {"category": "anchoring", "quote": "not in the text"}
        return {
            "items": [
                {
                    "id": it["id"],
                    "labels": [{"category": "bribery", "quote": "x"}, anchoring]
                    if it["id"] == "1"
                    else [anchoring],
                }
                for it in items[1:]
            ]
        }

    clf = LLMClassifier(bad, batch_size=50)
    out = clf.classify_sync(utterances(scen))
    problems = {p["problem"] for p in clf.problems}
    assert problems == {"unknown category 'bribery'", "missing from reply"}
    assert len(clf.problems) == 2 and not {p["key"] for p in clf.problems} & set(clf.cache)
    assert set(out["category"]) == {"anchoring"}
    assert not out["quote_in_text"].any()
    assert clf.usage_table()["approximate"].all()  # no _usage in the reply: estimated


def test_concurrency_limit(scen):
    active = peak = 0

    async def slow(messages, schema, *, role):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return {"items": []}

    LLMClassifier(slow, batch_size=1, concurrency=3).classify_sync(utterances(scen))
    assert peak == 3
    with pytest.raises(ValueError, match="batch_size and concurrency"):
        LLMClassifier(slow, batch_size=0)


def test_kappa_between_classifiers(scen, scen_ev):
    u = utterances(scen)
    evidence = utterance_predictions(scen_ev)
    perfect = LLMClassifier(FakeLLM(oracle(scen))).classify_sync(u)
    self_k = kappa_table(u, perfect, perfect).filter(pl.col("category") == "pooled")
    assert self_k["kappa"].item() == 1.0
    k = kappa_table(u, evidence, perfect).filter(pl.col("category") == "pooled")["kappa"].item()
    noisy = LLMClassifier(FakeLLM(oracle(scen), miss=0.3, seed=2)).classify_sync(u)
    kn = kappa_table(u, perfect, noisy).filter(pl.col("category") == "pooled")["kappa"].item()
    assert 0.0 < kn < 1.0 and not math.isnan(kn) and not math.isnan(k)


def test_items_carry_context_and_it_keys_the_cache():
    seen = []

    async def spy(messages, schema, *, role):
        items = json.loads(messages[-1]["content"])["items"]
        seen.extend(items)
        return {"items": [{"id": it["id"], "labels": []} for it in items]}

    base = {"run_id": ["f", "f"], "seq": [0, 1], "subrun": [1, 1], "round": [1, 1]}
    u = pl.DataFrame(
        {
            **base,
            "worker": ["W1", "W1"],
            "source": ["ballot", "ballot"],
            "text": ["By bid.", "By bid."],
            "context": ['{"ranking": ["W1", "W2"]}', '{"ranking": ["W2", "W1"]}'],
        }
    )
    LLMClassifier(spy).classify_sync(u)
    assert sorted(tuple(it["context"]["ranking"]) for it in seen) == [("W1", "W2"), ("W2", "W1")]


def test_classifier_spend_in_the_token_audit(scen):
    from mbb.analysis import classifier_spend, token_audit

    clf = LLMClassifier(FakeLLM(), model="judge", batch_size=10)
    clf.classify_sync(utterances(scen))
    usage = clf.usage_table()
    audit = token_audit({**scen, "llm_calls": usage.drop("approximate")})
    spend = classifier_spend(audit)
    assert spend.select("model", "calls").rows() == [("judge", 2)]
    assert spend["total_tokens"].item() == int(
        usage["prompt_tokens"].sum() + usage["completion_tokens"].sum()
    )


# --- the combined classifier --------------------------------------------------------------


def test_combined_classifier_asks_the_llm_only_where_the_evidence_is_unsure():
    from mbb.cli.classify_run import COMBINE_BAND, combine

    sure, unsure = COMBINE_BAND + 0.05, COMBINE_BAND / 2
    ev = [
        # sure yes (kept although the LLM disagrees), sure no (the LLM's label is ignored)
        (
            [{"category": "anchoring", "evidence": "cue"}],
            {"anchoring": sure, "cheap_talk": -sure},
        ),
        # unsure either side of the threshold: the LLM decides, both ways
        (
            [{"category": "reputation", "evidence": "model"}],
            {"reputation": unsure, "reciprocity": -unsure},
        ),
    ]
    llm = [
        [{"category": "cheap_talk", "evidence": 'quote: "x"'}],
        [{"category": "reciprocity", "evidence": 'quote: "owe"'}],
    ]
    out = combine(ev, llm)
    assert [[x["category"] for x in labs] for labs in out] == [["anchoring"], ["reciprocity"]]
    assert out[0][0]["decided_by"] == "evidence" and out[1][0]["decided_by"] == "llm"
    assert out[1][0]["evidence"].startswith("LLM (evidence margin -0.07)")
    # with no LLM labels the combined classifier drops the unsure labels only
    assert combine(ev, [[], []]) == [[{**ev[0][0][0], "decided_by": "evidence"}], []]


def test_kappa_by_category_rolls_up_and_pools():
    from mbb.cli.classify_run import kappa_by_category

    a = [["anchoring"], [], ["divide_and_conquer"], []]
    b = [["anchoring"], [], ["rival_targeting"], ["anchoring"]]
    k = kappa_by_category(a, b)
    assert k["rival_targeting"] == 1.0
    assert k["anchoring"] == pytest.approx(0.5)
    assert k["cheap_talk"] is None or k["cheap_talk"] == 1.0  # never labelled by either
    assert 0.5 < k["pooled"] < 1.0


def test_items_the_llm_left_out_keep_the_evidence_labels():
    from mbb.cli.classify_run import COMBINE_BAND, LlmLabels, combine

    unsure = COMBINE_BAND / 2
    ev = [([{"category": "reputation", "evidence": "model"}], {"reputation": unsure})] * 2
    llm = LlmLabels([[], []])
    llm.missing = {1}  # item 0: the LLM answered "no label"; item 1: it never answered
    out = combine(ev, llm)
    assert out[0] == []
    assert [x["category"] for x in out[1]] == ["reputation"]
    assert out[1][0]["decided_by"] == "evidence (no LLM answer)"

"""The LLM classifier against fakes: batching, caching, checking, audit rows, and kappa
against the evidence classifier."""

from __future__ import annotations

import asyncio
import json
import math

import polars as pl
import pytest

from mbb.analysis import (
    FakeLLM,
    LLMClassifier,
    kappa_table,
    response_schema,
    system_prompt,
    utterance_predictions,
    utterances,
)
from mbb.taxonomy import CATEGORY_NAMES


def test_prompt_and_schema_name_every_category():
    p = system_prompt()
    assert all(f"- {c}:" in p for c in CATEGORY_NAMES)
    enum = response_schema()["properties"]["items"]["items"]["properties"]["labels"]["items"]
    assert enum["properties"]["category"]["enum"] == list(CATEGORY_NAMES)


def test_batches_cache_and_labels(scen):
    fake = FakeLLM()
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
    assert by_seq[29] == by_seq[37] == {"price_primary"}
    assert by_seq[27] == {"reciprocity", "reputation"}
    assert out["quote_in_text"].all()
    assert out.filter(pl.col("seq") == 7)["evidence"].to_list() == ["back me ahead"]
    # a second pass is served from the cache: no new calls
    again = clf.classify_sync(u)
    assert len(fake.calls) == 5 and again.equals(out)
    usage = clf.usage_table()
    assert usage.height == 5 and usage["role"].unique().to_list() == ["classifier"]
    assert not usage["approximate"].any()


def test_cache_file_round_trip(scen, tmp_path):
    path = tmp_path / "cache.json"
    u = utterances(scen)
    LLMClassifier(FakeLLM(), cache=path).classify_sync(u)
    assert len(json.loads(path.read_text())) == 17
    fake = FakeLLM()
    LLMClassifier(fake, cache=path).classify_sync(u)
    assert fake.calls == []


def test_bad_replies_are_reported_not_swallowed(scen):
    async def bad(messages, schema, *, role):
        items = json.loads(messages[-1]["content"])["items"]
        return {
            "items": [
                {
                    "id": it["id"],
                    "labels": [
                        {"category": "bribery", "quote": "x"},
                        {"category": "anchoring", "quote": "not in the text"},
                    ],
                }
                for it in items[1:]
            ]
        }

    clf = LLMClassifier(bad, batch_size=50)
    out = clf.classify_sync(utterances(scen))
    problems = {p["problem"] for p in clf.problems}
    assert problems == {"unknown category 'bribery'", "missing from reply"}
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
    perfect = LLMClassifier(FakeLLM()).classify_sync(u)
    k = kappa_table(u, evidence, perfect)
    # the fake reads text only; in this scenario the structural evidence only corroborates
    # labels that the text also carries, so the two agree on every decision
    assert k.filter(pl.col("category") == "pooled")["kappa"].item() == 1.0
    noisy = LLMClassifier(FakeLLM(miss=0.3, seed=2)).classify_sync(u)
    kn = kappa_table(u, evidence, noisy).filter(pl.col("category") == "pooled")["kappa"].item()
    assert 0.0 < kn < 1.0 and not math.isnan(kn)


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

"""The LLM classifier through the real LLM layer and `openai` client against the loopback test
server (a stand-in judge model that labels by reading the text), its tokens in the token audit,
its cache, and Cohen's kappa against the evidence classifier."""

from __future__ import annotations

import json
import re

import polars as pl

from mbb.analysis import (
    LLMClassifier,
    classify_evidence,
    kappa_table,
    utterance_predictions,
    utterances,
)
from mbb.analysis.evidence import CUES
from mbb.analysis.llm_classifier import llm_layer_complete_json
from mbb.batch.build import load_params
from mbb.batch.runner import run_many
from mbb.core.eventlog import EventLog
from mbb.core.tables import tables_from_log
from mbb.llm.cache import LlmCache
from mbb.testing.testserver import FakeOpenAIServer, Reply

from .conftest import make_client, make_config

COMPILED = [(cat, re.compile(rx, re.IGNORECASE)) for cat, _, rx, _ in CUES]


def judge(body: dict) -> Reply:
    """Labels each item by the lexical cues it contains, quoting the match; skips every
    seventh label so the two classifiers disagree a little (kappa < 1)."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    items = json.loads(user)["items"]
    out, n = [], 0
    for it in items:
        labels = []
        for cat, rx in COMPILED:
            m = rx.search(it["text"])
            if m:
                n += 1
                if n % 7:
                    labels.append({"category": cat, "quote": m.group(0)})
        out.append({"id": it["id"], "labels": labels})
    return Reply.completion(json.dumps({"items": out}))


def test_llm_classifier_via_the_test_server_and_kappa(root, tmp_path):
    cond = load_params(root / "params" / "base.yaml", {"subruns": 1, "name": "kappa"})
    tables = run_many(cond, runs=2, processes=1).check().tables
    u = utterances(tables)
    evidence = utterance_predictions(classify_evidence(tables))
    log = EventLog("classifier")
    with FakeOpenAIServer(judge) as server:
        config = make_config(server, structured="json_object_schema")
        cache = LlmCache(tmp_path / "judge.sqlite")
        clf = LLMClassifier(
            llm_layer_complete_json(make_client(), config, cache=cache, emit=log.emit),
            model=config.model,
            batch_size=15,
            concurrency=3,
        )
        llm = clf.classify_sync(u)
        n_requests = len(server.completions)
        assert n_requests == -(-u.select("source", "text").unique().height // 15)
        # classifying again hits the request cache: no new requests
        again = LLMClassifier(
            llm_layer_complete_json(make_client(), config, cache=cache, emit=log.emit),
            model=config.model,
            batch_size=15,
            concurrency=3,
        ).classify_sync(u)
        assert len(server.completions) == n_requests
        assert again.sort(pl.all()).equals(llm.sort(pl.all()))
    calls = tables_from_log(log)["llm_calls"]
    assert (calls["role"] == "classifier").all() and calls.height == 2 * n_requests
    assert calls["cache_hit"].sum() == n_requests
    k = kappa_table(u, evidence, llm)
    pooled = k.filter(pl.col("category") == "pooled")["kappa"].item()
    assert 0.5 < pooled < 1.0, k


def test_validate_classifier_command_through_an_endpoint(tmp_path, capsys):
    """`mbb validate-classifier --classifier llm` against a local OpenAI-compatible server:
    the prompt carries every definition, each item its context; the table comes back."""
    from mbb.cli import main

    gold = tmp_path / "gold.jsonl"
    rows = [
        {
            "id": "g1",
            "channel": "ballot",
            "text": "Highest bid first.",
            "labels": ["price_primary"],
            "context": {"ranking": ["W2", "W1"], "bids": {"W1": 5, "W2": 9}},
        },
        {"id": "g2", "channel": "public", "text": "Thanks all.", "labels": []},
    ]
    gold.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def answer(body: dict) -> Reply:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        items = json.loads(user)["items"]
        out = [
            {
                "id": it["id"],
                "labels": [{"category": "price_primary", "quote": "Highest bid first"}]
                if "Highest" in it["text"]
                else [],
            }
            for it in items
        ]
        return Reply.completion(json.dumps({"items": out}))

    with FakeOpenAIServer(answer, models=("smollm2",)) as server:
        argv = ["validate-classifier", str(gold), "--classifier", "llm", "--boot", "20"]
        argv += ["--base-url", server.url, "--model", "smollm2"]
        argv += ["--structured", "json_object_schema", "--cache", str(tmp_path / "c.json")]
        assert main(argv) == 0
        body = server.completions[0].body
    system = body["messages"][0]["content"]
    assert system.count("Includes:") == 24 and "- metagaming:" in system
    assert body["response_format"]["type"] == "json_object"
    items = json.loads(body["messages"][1]["content"])["items"]
    ranked = next(it for it in items if it["text"].startswith("Highest"))
    assert ranked["context"]["ranking"] == ["W2", "W1"]
    assert ranked["context"]["channel"] == "ballot"
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("price_primary"))
    assert line.split()[1:3] == ["1", "1"]  # support 1, predicted 1
    # an endpoint that is not there is a one-line error, not a traceback
    nowhere = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--retries", "0"]
    assert main([*argv[:-4], *nowhere]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: llm classifier: ") and err.count("\n") == 1


def test_an_unusable_answer_is_unanswered_not_no_label(tmp_path, capsys):
    """A red team's finds against hostile endpoints. An answer the classifier cannot use (labels
    null, a string, an unknown category, an id given twice) was cached as "no label": F1 0.00
    and a kappa over items never answered, exit 0, and a rerun against a working endpoint
    reused the cache without a call. Now such an item is unanswered: not cached, left out of
    the LLM's table and agreement (said), `labels: null` in `mbb classify`; none answered is one
    line, exit 2. A wrong-shaped answer had raised a traceback, a 401 too. The cache is keyed
    by model (another model's answers were scored as this one's) and a damaged cache file is
    one line."""
    from mbb.cli import main

    gold = tmp_path / "gold.jsonl"
    texts = {"g1": ("Highest bid first.", ["price_primary"]), "g2": ("Thanks all.", [])}
    gold.write_text(
        "".join(
            json.dumps({"id": k, "channel": "public", "text": t, "labels": labs}) + "\n"
            for k, (t, labs) in texts.items()
        )
    )
    mode = {"bad": "null"}

    def answer(body: dict) -> Reply:
        if mode["bad"] == "401":
            return Reply.error(401, "no such key")
        items = json.loads(next(m["content"] for m in body["messages"] if m["role"] == "user"))
        out = []
        for it in items["items"]:
            good = it["text"].startswith("Highest")
            labels: object = [{"category": "price_primary", "quote": "Highest bid"}] if good else []
            if not good:  # the other item is answered badly
                labels = {
                    "null": None,
                    "string": "price_primary",
                    "unknown": [{"category": "PricePrimary", "quote": "x"}],
                }.get(mode["bad"], labels)
            out.append({"id": it["id"], "labels": labels})
            if not good and mode["bad"] == "twice":
                out.append({"id": it["id"], "labels": []})
        return Reply.completion(json.dumps({"items": out}))

    cache = tmp_path / "c.json"
    with FakeOpenAIServer(answer, models=("m", "other")) as server:
        base = ["--classifier", "llm", "--base-url", server.url, "--model", "m"]
        base += ["--structured", "json_object_schema", "--cache", str(cache), "--retries", "0"]
        for bad in ("null", "string", "unknown", "twice"):
            mode["bad"] = bad
            cache.unlink(missing_ok=True)
            rep = tmp_path / f"{bad}.json"
            assert main(["validate-classifier", str(gold), *base, "--json", str(rep)]) == 0, bad
            out, err = capsys.readouterr()
            assert "note: 1 of 2 items unanswered by the LLM" in out, bad
            assert "warning: llm classifier: 1 of 2 item(s) unanswered" in err, bad
            assert json.loads(rep.read_text())["unanswered"] == ["g2"]
            assert list(json.loads(cache.read_text()).values()) == [
                [{"category": "price_primary", "quote": "Highest bid", "in_text": True}]
            ]
        assert main(["classify", str(gold), *base, "--out", str(tmp_path / "o.jsonl")]) == 0
        rows = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
        assert [(r["labels"], r.get("unanswered")) for r in rows] == [
            (["price_primary"], None),
            (None, True),
        ]
        capsys.readouterr()
        # another model's answers are not this one's: it is asked itself
        asked = len(server.completions)
        other = [*base[:4], "--model", "other", *base[6:]]
        assert main(["validate-classifier", str(gold), *other]) == 0
        assert len(server.completions) == asked + 1
        capsys.readouterr()
        mode["bad"] = "401"
        cache.unlink()
        assert main(["validate-classifier", str(gold), *base]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: llm classifier: endpoint m at") and err.count("\n") == 1
    cache.write_text("{not json")
    assert main(["validate-classifier", str(gold), *base]) == 2
    assert "not a label cache of mbb's LLM classifier" in capsys.readouterr().err


def test_one_command_scores_several_splits_with_kappa_and_the_combined_classifier(tmp_path, capsys):
    """`validate-classifier A B --classifier llm`: per split the LLM's table, the evidence
    classifier's, their kappa per category and the combined classifier's, through the real
    client against the loopback server."""
    from mbb.cli import build_parser, main
    from mbb.cli.classify_run import _gold_paths

    items = {
        "Highest bid goes first, that's what the bids are for.": ["price_primary"],
        "You owe me one from last subrun; I'm calling it in now.": ["reciprocity"],
        "Thanks, see you next round.": [],
        "Fine, same as last time then.": ["coalition_loyalty"],
    }
    paths = []
    for k, chunk in enumerate([list(items)[:2], list(items)[2:]]):
        rows = [
            {
                "id": f"s{k}-{i}",
                "channel": "public",
                "text": t,
                "labels": items[t],
                "context": {"in_reply_to": "W2: Same alternation as last round?"} if k else {},
            }
            for i, t in enumerate(chunk)
        ]
        p = tmp_path / f"split{k}.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
        paths.append(str(p))

    def oracle(body: dict) -> Reply:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        out = [
            {
                "id": it["id"],
                "labels": [{"category": c, "quote": it["text"][:10]} for c in items[it["text"]]],
            }
            for it in json.loads(user)["items"]
        ]
        return Reply.completion(json.dumps({"items": out}))

    js = tmp_path / "report.json"
    with FakeOpenAIServer(oracle, models=("judge",)) as server:
        argv = [*paths, "--classifier", "llm", "--boot", "20", "--json", str(js)]
        argv += ["--base-url", server.url, "--model", "judge", "--structured", "json_object_schema"]
        assert main(["validate-classifier", *argv]) == 0
        assert len(server.completions) == 2  # one request per split (batch size 10)
    out = capsys.readouterr().out
    assert out.count("agreement of the LLM with the evidence classifier") == 2
    assert out.count("combined (evidence where its margin") == 2
    rep = json.loads(js.read_text())
    assert list(rep) == [*paths, "summary"]
    # the files side by side, then pooled: the oracle is right on every item of both
    assert [r["split"] for r in rep["summary"]] == ["split0.jsonl", "split1.jsonl", "pooled"]
    assert [r["items"] for r in rep["summary"]] == [2, 2, 4]
    assert all(r["macro_f1"] == 1.0 for r in rep["summary"])
    # split 0 has no neutral item: no share, not 0 %
    assert [r["neutral_labelled"] for r in rep["summary"]] == [None, 0, 0]
    assert sum(line.startswith("summary, classifier llm") for line in out.splitlines()) == 1
    pooled = out.splitlines()[-1].split()
    assert pooled[:3] == ["pooled", "4", "1.000"] and pooled[-3:-1] == ["0/1", "0.0%"], out
    for path in paths:
        r = rep[path]
        assert set(r) == {
            "taxonomy",
            "separate",
            "provisional_items",
            "items",
            "unanswered",
            "evidence",
            "kappa_llm_vs_evidence",
            "combined",
            "combined_separate",
            "combined_llm_decided",
        }
        assert len(r["kappa_llm_vs_evidence"]) == 22  # 21 categories + pooled
        assert r["unanswered"] == [] and r["items"] > 0
        llm = {x["category"]: x for x in r["taxonomy"]}
        assert llm["macro"]["f1"] == 1.0  # the oracle LLM is perfect on these items
    # --frozen names the twenty-eight frozen splits; nothing at all is an error naming the fix
    args = build_parser().parse_args(["validate-classifier", "--frozen"])
    assert [p.rsplit("/", 1)[-1] for p in _gold_paths(args)] == [
        "test.jsonl",
        "test2.jsonl",
        "test3.jsonl",
        "test4.jsonl",
        "test5.jsonl",
        "test6.jsonl",
        "test7.jsonl",
        "test8.jsonl",
        "test9.jsonl",
        "test10.jsonl",
        "test11.jsonl",
        "test12.jsonl",
        "test13.jsonl",
        "test14.jsonl",
        "test15.jsonl",
        "test16.jsonl",
        "test17.jsonl",
        "test18.jsonl",
        "test19.jsonl",
        "test20.jsonl",
        "test21.jsonl",
        "test22.jsonl",
        "test23.jsonl",
        "test24.jsonl",
        "test25.jsonl",
        "test26.jsonl",
        "test27.jsonl",
        "test28.jsonl",
        "test29.jsonl",
        "test30.jsonl",
        "test31.jsonl",
    ]
    assert main(["validate-classifier"]) == 2
    assert "give a gold file, or --frozen" in capsys.readouterr().err

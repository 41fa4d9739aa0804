"""The taxonomy classifier's pipeline: the utterance-file format and its errors, the
deterministic training script, `mbb classify` / `mbb validate-classifier`, the IPW recall
estimate, and structural citation of any rule. No test asserts a score on the gold corpus."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from mbb.analysis.corpus import CorpusError, read_utterances
from mbb.analysis.validation import export_ipw_sample, gold_prf, ipw_estimates
from mbb.cli import main
from mbb.cli.classify_run import classify_items
from mbb.core.taxonomy import ALL_LABELS, roll_up


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


ITEMS = [
    {
        "id": "x-1",
        "channel": "ballot",
        "text": "Highest bid goes first, as always: W2, W1.",
        "context": {"speaker": "W1", "bids": {"W1": 90, "W2": 140}, "ranking": ["W2", "W1"]},
    },
    {"id": "x-2", "channel": "private", "text": "Thanks, see you next round.", "context": {}},
    {
        "id": "x-3",
        "channel": "public",
        "text": "From now on, whoever lost the last tie goes first next time.",
        "context": {"speaker": "W3", "future_key": "kept, not an error"},
    },
]


# --- the format -----------------------------------------------------------------------------


def test_reader_keeps_context_and_allows_extra_context_keys(tmp_path):
    items = read_utterances(write(tmp_path / "u.jsonl", ITEMS))
    assert [u.id for u in items] == ["x-1", "x-2", "x-3"]
    assert items[0].context.ranking == ["W2", "W1"] and items[0].source == "ballot"
    assert items[2].context.model_dump()["future_key"] == "kept, not an error"
    assert items[1].labels is None


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "{not json",
            "{path}:2: not valid JSON (Expecting property name enclosed in double quotes)",
        ),
        (  # past Python's int digit limit json.loads raises a plain ValueError
            "1" * 5000,
            "{path}:2: not valid JSON (Exceeds the limit (4300 digits) for integer string "
            "conversion)",
        ),
        (  # past json's recursion: a RecursionError, not a ValueError, had escaped
            "[" * 100_000 + "]" * 100_000,
            "{path}:2: not valid JSON (JSON nested too deeply)",
        ),
        ('["a list"]', "{path}:2: expected a JSON object, got list"),
        ('{"id": "b", "channel": "radio", "text": "t"}', "{path}:2: channel: Input should be "),
        ('{"id": "b", "channel": "note"}', "{path}:2: text: Field required"),
        ('{"id": "a", "channel": "note", "text": "t"}', "{path}:2: id 'a' repeats line 1"),
        ('{"id": "b", "channel": "note", "text": "t", "colour": 1}', "{path}:2: colour: Extra"),
    ],
)
def test_bad_lines_name_the_file_and_line(tmp_path, capsys, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "channel": "note", "text": "fine"}\n' + line + "\n")
    assert main(["classify", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: " + message.format(path=path)), err
    assert err.count("\n") == 1 and "Traceback" not in err  # one line, no traceback


def test_unknown_category_lists_the_valid_ones(tmp_path, capsys):
    path = write(tmp_path / "g.jsonl", [{**ITEMS[1], "labels": ["bribery"]}])
    assert main(["validate-classifier", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: {path}:1: labels: unknown category 'bribery'; valid: " + ", ".join(ALL_LABELS)
    )


def test_a_gold_file_needs_labels(tmp_path, capsys):
    path = write(tmp_path / "g.jsonl", ITEMS[:1])
    assert main(["validate-classifier", str(path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {path}:1: no 'labels' (a gold file needs them; [] = neutral)"
    )


def test_missing_and_empty_files(tmp_path, capsys):
    assert main(["classify", str(tmp_path / "nope.jsonl")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'nope.jsonl'}: no such file"
    (tmp_path / "empty.jsonl").write_text("\n")
    assert main(["classify", str(tmp_path / "empty.jsonl")]) == 2
    assert "no utterances" in capsys.readouterr().err


# --- the commands ---------------------------------------------------------------------------


def test_classify_round_trip(tmp_path):
    src = write(tmp_path / "u.jsonl", ITEMS)
    out = tmp_path / "labels.jsonl"
    assert main(["classify", str(src), "--out", str(out)]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["x-1", "x-2", "x-3"]  # one line per input, in order
    for r in rows:
        assert set(r) == {"id", "channel", "labels", "taxonomy_labels", "evidence"}
        assert set(r["labels"]) <= set(ALL_LABELS)
        assert r["taxonomy_labels"] == roll_up(r["labels"])
        assert sorted({e["category"] for e in r["evidence"]}) == r["labels"]
        assert all(e["evidence"] for e in r["evidence"])  # every label keeps its evidence
    assert "price_primary" in rows[0]["labels"]
    assert "rule_making_citation" in rows[2]["labels"]


def test_the_llm_classifier_without_options_says_what_it_needs(tmp_path):
    items = read_utterances(write(tmp_path / "u.jsonl", ITEMS))
    with pytest.raises(CorpusError, match=r"^--classifier llm needs --model"):
        classify_items(items, "llm")  # no argparse namespace at all (a library call)


def test_validate_prints_the_table_with_cis(tmp_path, capsys):
    gold = [
        {**ITEMS[0], "labels": ["price_primary"]},
        {**ITEMS[1], "labels": []},
        {**ITEMS[2], "labels": ["rule_making_citation", "tie_break_deference"]},
    ]
    path = write(tmp_path / "g.jsonl", gold)
    js = tmp_path / "t.json"
    assert main(["validate-classifier", str(path), "--boot", "50", "--json", str(js)]) == 0
    out = capsys.readouterr().out
    assert "support" not in out and "precision" in out and "neutral labelled" in out
    t = {r["category"]: r for r in json.loads(js.read_text())["taxonomy"]}
    assert t["price_primary"]["support"] == 1
    assert t["tie_break_deference"]["support"] == 1
    assert len(t) == 21 + 2  # the 21, the macro row, the neutral row


def test_gold_prf_intervals_bracket_the_estimate():
    rng = np.random.default_rng(1)
    gold = [["anchoring"] if rng.random() < 0.3 else [] for _ in range(300)]
    pred = [
        (["anchoring"] if (g and rng.random() < 0.7) or (not g and rng.random() < 0.1) else [])
        for g in gold
    ]
    t = gold_prf(gold, pred, ["anchoring"], n_boot=300).row(0, named=True)
    assert t["support"] == sum(bool(g) for g in gold)
    for k in ("precision", "recall", "f1"):
        assert t[f"{k}_lo"] <= t[k] <= t[f"{k}_hi"]
    assert t["recall_lo"] < 0.7 < t["recall_hi"]


# --- training ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_dev(tmp_path_factory):
    """A small labelled file in the corpus format, two writers (invented here)."""
    rows = []
    templates = {
        "price_primary": ["Highest bid should go first, {n} credits is mine.", "Order by bids."],
        "scope_reduction": ["I can't finish anyway; {n} seconds is enough.", "Skip me."],
        "": ["Thanks, noted.", "Posting my ballot in {n} seconds."],
    }
    k = 0
    for w in "PQ":
        for lab, texts in templates.items():
            for i in range(6):
                k += 1
                rows.append(
                    {
                        "id": f"{w}-{k}",
                        "writer": w,
                        "channel": ["note", "public", "ballot"][i % 3],
                        "text": texts[i % 2].format(n=10 * i + k),
                        "labels": [lab] if lab else [],
                    }
                )
    return write(tmp_path_factory.mktemp("dev") / "dev.jsonl", rows)


def test_training_is_deterministic(small_dev, tmp_path):
    from mbb.analysis.train_taxonomy import main as train

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert train([str(small_dev), "--out", str(a)]) == 0
    assert train([str(small_dev), "--out", str(b)]) == 0
    assert a.read_bytes() == b.read_bytes()
    spec = json.loads(a.read_text())
    assert spec["trained_on"]["items"] == 36 and spec["trained_on"]["writers"] == ["P", "Q"]
    assert set(spec["labels"]) >= {"price_primary", "scope_reduction", "__any__"}
    # the trained file drives the classifier
    src = write(tmp_path / "u.jsonl", [{"id": "1", "channel": "note", "text": "Skip me."}])
    out = tmp_path / "o.jsonl"
    assert main(["classify", str(src), "--out", str(out), "--model-file", str(a)]) == 0
    assert json.loads(out.read_text())["labels"] == ["scope_reduction"]


def test_training_takes_dev_as_an_option_and_any_number_of_writers(small_dev, tmp_path):
    from mbb.analysis import train_taxonomy as tt
    from mbb.analysis.corpus import read_utterances

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert tt.main([str(small_dev), "--out", str(a)]) == 0
    assert tt.main(["--dev", str(small_dev), "--out", str(b)]) == 0
    assert a.read_bytes() == b.read_bytes()
    with pytest.raises(SystemExit):
        tt.main([str(small_dev), "--dev", str(tmp_path / "other.jsonl"), "--out", str(b)])
    # many writers: inner folds are capped, every item is held out exactly once
    items = read_utterances(small_dev, require_labels=True)
    many = [u.model_copy(update={"writer": f"W{i % 9}"}) for i, u in enumerate(items)]
    folds = tt._folds(many)
    assert len(folds) == tt.MAX_FOLDS
    assert (np.sum(folds, axis=0) == 1).all()
    assert json.loads(a.read_text())["hyperparameters"]["C"] in tt.C_GRID


def test_training_can_leave_writers_out_and_says_so(small_dev, tmp_path, capsys):
    from mbb.analysis.train_taxonomy import main as train

    out = tmp_path / "m.json"
    assert train([str(small_dev), "--out", str(out), "--exclude-writers", "Q"]) == 0
    spec = json.loads(out.read_text())["trained_on"]
    assert spec["writers"] == ["P"] and spec["excluded_writers"] == ["Q"]
    assert spec["items"] == 18 and spec["file"] == "dev.jsonl"
    # a writer the file does not have is a typo, not a no-op
    capsys.readouterr()
    assert train([str(small_dev), "--out", str(out), "--exclude-writers", "Q,ZZ"]) == 2
    assert "ZZ" in capsys.readouterr().err
    # none left out: the spec has no such key (older model files stay byte-identical)
    assert train([str(small_dev), "--out", str(out), "--exclude-writers", ""]) == 0
    assert "excluded_writers" not in json.loads(out.read_text())["trained_on"]
    # by default mbb's own list, EXCLUDED_WRITERS, as far as the file has its writers
    renamed = tmp_path / "dev.jsonl"
    renamed.write_text(small_dev.read_text().replace('"writer": "Q"', '"writer": "CN"'))
    assert train([str(renamed), "--out", str(out)]) == 0
    spec = json.loads(out.read_text())["trained_on"]
    assert spec["writers"] == ["P"] and spec["excluded_writers"] == ["CN"]


def test_training_rejects_a_bad_dev_file(tmp_path, capsys):
    from mbb.analysis.train_taxonomy import main as train

    path = tmp_path / "dev.jsonl"
    path.write_text('{"id": "1", "channel": "note", "text": "x"}\n')
    assert train([str(path), "--out", str(tmp_path / "m.json")]) == 2
    assert "no 'labels'" in capsys.readouterr().err


# --- IPW review -------------------------------------------------------------------------


def _population(n, prevalence, recall, false_rate, seed):
    rng = np.random.default_rng(seed)
    truth = rng.random(n) < prevalence
    pred = np.where(truth, rng.random(n) < recall, rng.random(n) < false_rate)
    u = pl.DataFrame({"run_id": ["r"] * n, "seq": list(range(n)), "text": ["t"] * n})
    p = pl.DataFrame({"run_id": ["r"] * int(pred.sum()), "seq": np.flatnonzero(pred).tolist()})
    p = p.with_columns(pl.lit("anchoring").alias("category"))
    return u, p, truth


def _review(sample: pl.DataFrame, truth) -> pl.DataFrame:
    return sample.with_columns(
        pl.Series("human_labels", ["anchoring" if truth[s] else "" for s in sample["seq"]])
    )


def test_ipw_recovers_a_planted_recall(tmp_path):
    u, p, truth = _population(20_000, 0.10, recall=0.6, false_rate=0.01, seed=3)
    sample = export_ipw_sample(u, p, tmp_path / "s.csv", per_stratum=200, unlabelled=600)
    assert set(sample["stratum"]) == {"anchoring", "none"}  # the unlabelled stratum is sampled
    path = tmp_path / "reviewed.csv"
    _review(sample, truth).write_csv(path)
    est = ipw_estimates(path, ["anchoring"], n_boot=400).row(0, named=True)
    true_recall = float(p.height and truth[p["seq"].to_numpy()].sum() / truth.sum())
    assert est["recall_lo"] <= true_recall <= est["recall_hi"]
    assert abs(est["recall"] - 0.6) < 0.1
    # without the weights the same reviewed rows overstate recall badly
    r = _review(sample, truth)
    said = r["human_labels"] == "anchoring"
    naive = ((r["predicted"] == "anchoring") & said).sum() / said.sum()
    assert naive > 0.85


def test_ipw_null_classifier_has_recall_of_its_label_rate(tmp_path):
    # predictions independent of the truth: recall is just the labelling rate (0.2), not high
    u, p, truth = _population(20_000, 0.10, recall=0.2, false_rate=0.2, seed=4)
    sample = export_ipw_sample(u, p, tmp_path / "s.csv", per_stratum=300, unlabelled=600)
    est = ipw_estimates(_review(sample, truth), ["anchoring"], n_boot=400).row(0, named=True)
    assert est["recall_lo"] <= 0.2 <= est["recall_hi"]
    assert est["precision_lo"] <= 0.1 <= est["precision_hi"]


def test_ipw_rejects_unknown_categories(tmp_path):
    df = pl.DataFrame(
        {"stratum": ["none"], "weight": [1.0], "predicted": [""], "human_labels": ["bribery"]}
    )
    with pytest.raises(ValueError, match=r"unknown category 'bribery' in human_labels \(row 1\)"):
        ipw_estimates(df)


# --- structural citation of any rule --------------------------------------------------------


def test_a_novel_rule_proposed_earlier_is_cited_later(events):
    from mbb.analysis import classify_evidence

    Log, tables_of = events
    log = Log("base-seed0007")
    log.run_started("base", [("A", "price_first", 100, 100.0), ("B", "price_first", 100, 100.0)])
    log.subrun_started(1, {"A": 100, "B": 100}, {"A": 100.0, "B": 100.0})
    decls = {"A": (10, 60, ""), "B": (10, 60, "")}
    rule = "From now on, the loser of the last tie goes first in the next tie."
    log.round(1, 1, ["A", "B"], decls, [("A", None, rule)], {}, ["A", "B"], [10, 10])
    cite = "We tied again; per our rule the loser of the last tie goes first, so B."
    log.round(1, 2, ["A", "B"], decls, [("B", None, cite)], {}, ["B", "A"], [10, 10])
    unrelated = "Per our rule nothing changes about the windows."  # shares < 2 content words
    log.round(1, 3, ["A", "B"], decls, [("A", None, unrelated)], {}, ["A", "B"], [10, 10])
    ev = classify_evidence(tables_of(log))
    st = ev.filter(
        (pl.col("basis") == "structural") & (pl.col("category") == "rule_making_citation")
    )
    assert st.select("worker", "round").rows() == [("B", 2)]
    assert st["evidence"].item() == (
        f'invokes rule "{rule}" first proposed by A in s1r1 (shared: last, loser, tie)'
    )


def test_the_gate_rises_to_keep_the_neutral_bound_when_sure_labels_pass_it(monkeypatch):
    """Neutral items whose label clears GATE_OVERRIDE pass any gate, so the gate is chosen
    higher to leave at most NEUTRAL_TARGET of the neutral items labelled in all."""
    import mbb.analysis.train_taxonomy as T
    from mbb.analysis.corpus import Utterance

    n = 200  # 100 neutral items, gate probability spread evenly; 100 labelled, the gate sure
    g = np.concatenate([np.linspace(0.0, 0.9, 100), np.linspace(0.9, 1.0, 100)])
    lab = np.full(n, 0.6)
    lab[[0, 1, 2]] = 0.99  # three neutral items the gate rejects but the label model is sure of
    lab[100:150] = 0.99
    items = [
        Utterance(id=f"X-{i}", channel="public", text="x", labels=[] if i < 100 else ["anchoring"])
        for i in range(n)
    ]
    p, th = {"anchoring": lab, T.ANY: g}, {"anchoring": 0.5}

    def labelled_neutral(gate: float, override: float | None) -> float:
        passed = (g >= gate) | (lab >= (override if override is not None else 2.0))
        return float(np.mean((lab >= 0.5)[:100] & passed[:100]))

    monkeypatch.setattr(T, "GATE_OVERRIDE", None)
    plain = T._neutral_gate(p, items, th)
    monkeypatch.setattr(T, "GATE_OVERRIDE", 0.98)
    with_override = T._neutral_gate(p, items, th)
    assert with_override > plain
    assert labelled_neutral(plain, None) <= T.NEUTRAL_TARGET
    assert labelled_neutral(with_override, 0.98) <= T.NEUTRAL_TARGET
    assert labelled_neutral(with_override - 0.01, 0.98) > T.NEUTRAL_TARGET  # the lowest such

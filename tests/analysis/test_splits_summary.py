"""`gold_eval.splits_summary`: the scored gold files side by side, as `validate-classifier`
prints them after the per-file tables."""

from __future__ import annotations

from mbb.analysis.corpus import Utterance
from mbb.analysis.gold_eval import score_gold, splits_summary


def _items(rows: list[tuple[str, list[str]]]) -> list[Utterance]:
    return [
        Utterance.model_validate({"id": f"u{i}", "channel": "public", "text": t, "labels": labs})
        for i, (t, labs) in enumerate(rows)
    ]


def test_each_file_gets_its_macro_its_weakest_category_and_its_neutral_share():
    items = _items(
        [
            ("a", ["price_primary"]),
            ("b", ["price_primary"]),
            ("c", ["reciprocity"]),
            ("d", ["reciprocity"]),
            ("e", []),
            ("f", []),
            ("g", []),
            ("h", []),
        ]
    )
    # price primary found twice; reciprocity once of two; one neutral item of four labelled
    pred = [["price_primary"], ["price_primary"], ["reciprocity"], [], ["anchoring"], [], [], []]
    t, _ = score_gold(items, pred, n_boot=50)
    only_positive, _ = score_gold(items[:4], pred[:4], n_boot=50)
    table = splits_summary([("one", len(items), t), ("no-neutral", 4, only_positive)])
    one, none = table.to_dicts()
    assert (one["split"], one["items"], one["weakest"]) == ("one", 8, "reciprocity")
    assert abs(one["weakest_f1"] - 2 / 3) < 1e-3
    assert (one["neutral"], one["neutral_labelled"], one["neutral_share"]) == (4, 1, 0.25)
    assert one["neutral_lo"] <= 0.25 <= one["neutral_hi"]
    assert one["macro_lo"] <= one["macro_f1"] <= one["macro_hi"]
    # no neutral item: no share to give, never a 0 %
    assert (none["neutral"], none["neutral_labelled"], none["neutral_share"]) == (0, None, None)

"""The gold corpus (mbb/analysis/gold/): the frozen test split, the adjudication and the
agreement figures are what the files say they are. Scores are not tested here."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

from mbb.analysis.agreement import GOLD_DIR, adjudicate, agreement, read_annotations
from mbb.core.taxonomy import CATEGORY_NAMES

# Frozen before any classifier was tuned: changing the test split must be a visible decision
TEST_SHA256 = "fde36e73ffbdb8b7668194087de97fa1a42ccad7714b9be45a35324583ca1753"
SEPARATE = ["exclusionary_coalition", "divide_and_conquer", "metagaming"]


def gold(split: str) -> list[dict]:
    return [json.loads(x) for x in (GOLD_DIR / f"{split}.jsonl").read_text().splitlines()]


def test_the_test_split_is_frozen():
    assert hashlib.sha256((GOLD_DIR / "test.jsonl").read_bytes()).hexdigest() == TEST_SHA256


def test_splits_are_by_writer_and_cover_every_category():
    dev, test = gold("dev"), gold("test")
    assert {d["writer"] for d in test} == {"B", "F"}
    assert {d["writer"] for d in dev} == set("ACDEGHIJ")
    counts = Counter(label for d in dev + test for label in d["labels"])
    assert all(counts[c] >= 30 for c in [*CATEGORY_NAMES, *SEPARATE]), counts
    assert sum(not d["labels"] for d in dev + test) >= 150
    assert {d["channel"] for d in dev + test} == {"note", "private", "public", "ballot"}


def test_gold_labels_are_the_majority_of_three_independent_annotations():
    ann = read_annotations()
    items = gold("dev") + gold("test")
    assert len(ann) == len(items) == len({d["id"] for d in items})
    for d in items:
        assert d["labels"] == adjudicate(ann[d["id"]]), d["id"]


def test_adjudication_keeps_what_two_of_three_give():
    assert adjudicate({"author": ["a", "b"], "blind_1": ["a"], "blind_2": []}) == ["a"]
    assert adjudicate({"author": [], "blind_1": [], "blind_2": ["c"]}) == []


def test_agreement_file_is_recomputed_from_the_annotations():
    saved = json.loads((GOLD_DIR / "agreement.json").read_text())
    labels = [row["category"] for row in saved["categories"] if row["category"] != "neutral"]
    assert labels[: len(CATEGORY_NAMES)] == list(CATEGORY_NAMES)
    assert agreement(read_annotations(), labels) == saved

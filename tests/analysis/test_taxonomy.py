"""The taxonomy: 21 categories, families and markers as the paper assigns them."""

from __future__ import annotations

from mbb.analysis import CUES
from mbb.taxonomy import BY_NAME, CATEGORIES, CATEGORY_NAMES, category_table


def test_twenty_one_unique_categories_with_definitions():
    assert len(CATEGORIES) == 21 and len(set(CATEGORY_NAMES)) == 21
    assert all(len(c.definition) > 40 for c in CATEGORIES)
    assert category_table().shape == (21, 6)


def test_markers_follow_section_4_3():
    rel = {c.name for c in CATEGORIES if c.marker == "relational"}
    non = {c.name for c in CATEGORIES if c.marker == "non_relational"}
    assert {"reciprocity", "coalition_loyalty", "reputation"} <= rel
    assert {
        "social_proof",
        "rule_making_citation",
        "tie_break_deference",
        "earliest_deadline_first",
        "shortest_job_first",
        "recency_first",
    } <= non
    assert BY_NAME["price_primary"].marker == "none" and BY_NAME["price_primary"].symbol == ""
    assert BY_NAME["reciprocity"].symbol == "†" and BY_NAME["social_proof"].symbol == "‡"


def test_families():
    rules = {c.name for c in CATEGORIES if c.family == "rules"}
    assert {
        "earliest_deadline_first",
        "shortest_job_first",
        "recency_first",
        "rule_making_citation",
        "price_primary",
        "tie_break_deference",
    } == rules


def test_every_category_has_a_lexical_cue():
    assert {c for c, _, _, _ in CUES} == set(CATEGORY_NAMES)

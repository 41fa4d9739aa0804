"""The taxonomy: 21 categories, families and markers as the paper assigns them."""

from __future__ import annotations

import re

import polars as pl
import pytest

from mbb.analysis import CUES
from mbb.core.taxonomy import (
    ALL_LABELS,
    BY_NAME,
    CATEGORIES,
    CATEGORY_NAMES,
    SEPARATE_NAMES,
    category_table,
    roll_up,
)


def test_twenty_one_unique_categories_with_definitions():
    assert len(CATEGORIES) == 21 and len(set(CATEGORY_NAMES)) == 21
    assert all(len(c.definition) > 40 for c in CATEGORIES)
    assert category_table().shape == (21, 9)
    t = category_table()
    assert t["literature"].str.len_chars().min() > 10 and t["concept"].str.len_chars().min() > 10
    assert "Tversky" in t.filter(pl.col("name") == "anchoring")["literature"].item()


def test_separately_reported_labels_roll_up():
    assert SEPARATE_NAMES == ("exclusionary_coalition", "divide_and_conquer", "metagaming")
    assert ALL_LABELS[:21] == CATEGORY_NAMES and len(ALL_LABELS) == 24
    assert roll_up(["exclusionary_coalition", "coalition_formation"]) == [
        "coalition_formation",
        "rival_targeting",
    ]
    assert roll_up(["divide_and_conquer"]) == ["rival_targeting"]
    assert roll_up(["metagaming"]) == []
    t = category_table(separate=True)
    assert t.height == 24 and t["reported"].to_list().count("separately") == 3


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
    assert {c for c, _, _, _ in CUES} == set(ALL_LABELS)


def test_every_lexicon_pattern_runs_in_both_regex_engines():
    """Cues match in Python's `re` (`cue_hits`) and their spans are cut out in polars'
    Rust engine (`evidence._CUE_RX`), which has no look-around and no back-references: a
    pattern only one engine reads breaks the evidence of every run. The round-16 candidate's
    cue ("(?<!\\bin )... favour") was such a pattern."""
    from mbb.analysis.lexicon import LEXICON

    probe = pl.Series(["I owe you one; by bid."])
    for cue in LEXICON:
        for rx in filter(None, (cue.regex, cue.unless)):
            re.compile(rx, re.I)
            probe.str.contains(f"(?i){rx}")  # raises ComputeError where polars cannot read it
    with pytest.raises(pl.exceptions.ComputeError, match="look-around"):
        probe.str.contains(r"(?<!\bin )\bfavour")

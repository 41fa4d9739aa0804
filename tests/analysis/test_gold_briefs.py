"""The papers a gold round hands out: briefs with the quotas they promise, and a blind copy that
gives an annotator nothing but the utterance and its context."""

from __future__ import annotations

import json

import pytest

from mbb.analysis.gold_briefs import (
    STYLE_QUOTAS,
    annotator_brief,
    blind_copy,
    label_quotas,
    main,
    writer_brief,
)
from mbb.core.taxonomy import ALL_LABELS


@pytest.mark.parametrize(("kind", "total"), [("test", 122), ("dev", 136)])
def test_quotas_add_up(kind, total):
    labels = label_quotas(kind)
    assert set(labels) == {*ALL_LABELS, "neutral"}
    assert sum(labels.values()) == sum(STYLE_QUOTAS[kind].values()) == total


@pytest.mark.parametrize("kind", ["test", "dev"])
def test_a_writer_brief_defines_every_label_and_names_its_output(kind):
    brief = writer_brief("ZZ", "Ship's radio operators.", "/x/raw/ZZ.jsonl", kind)
    assert "Ship's radio operators." in brief and "/x/raw/ZZ.jsonl" in brief
    assert all(f"- `{name}`:" in brief for name in ALL_LABELS)
    assert f"exactly {sum(label_quotas(kind).values())} items" in brief
    assert all(f"- `{s}` ({n} items)" in brief for s, n in STYLE_QUOTAS[kind].items())
    assert "classifier" not in brief.lower()  # writers never learn what reads their text


def test_an_annotator_brief_names_its_files_and_asks_for_reading():
    brief = annotator_brief("ZZ", "r99a", 5, "/x/blind/ZZ.jsonl", "/x/annot/ZZ.r99a.jsonl")
    assert "/x/blind/ZZ.jsonl" in brief and "/x/annot/ZZ.r99a.jsonl" in brief
    assert "5 items" in brief and "by keywords" in brief


def _raw(tmp_path, n=12):
    rows = [
        {
            "id": f"ZZ-{i:04d}",
            "writer": "ZZ",
            "style": "plain",
            "channel": "ballot" if i % 3 == 0 else "public",
            "text": f"utterance {i}",
            "labels": ["anchoring"] if i % 2 else [],
            "main": "anchoring" if i % 2 else "neutral",
            "context": {"speaker": "W1", "round": 1, "subrun": 1, "ranking": ["W1", "W2"]},
        }
        for i in range(1, n + 1)
    ]
    raw = tmp_path / "raw" / "ZZ.jsonl"
    raw.parent.mkdir(parents=True)
    raw.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return raw, rows


def test_the_blind_copy_keeps_only_what_an_annotator_may_see_shuffled(tmp_path):
    raw, rows = _raw(tmp_path)
    out = tmp_path / "blind" / "ZZ.jsonl"
    assert blind_copy(raw, out) == 12
    blind = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(set(b) == {"id", "channel", "text", "context"} for b in blind)
    assert sorted(b["id"] for b in blind) == [r["id"] for r in rows]
    assert [b["id"] for b in blind] != [r["id"] for r in rows]  # order says nothing
    first = out.read_text()
    blind_copy(raw, out)
    assert out.read_text() == first  # seeded: the same copy every time


def test_the_command_writes_briefs_in_the_layout_gold_build_reads(tmp_path, capsys):
    _raw(tmp_path)
    voice = tmp_path / "voice.txt"
    voice.write_text("Ship's radio operators.")
    assert main(["writer", str(tmp_path), "ZZ", "--voice", str(voice)]) == 0
    assert str(tmp_path / "raw" / "ZZ.jsonl") in (tmp_path / "briefs" / "ZZ.md").read_text()
    assert main(["annotator", str(tmp_path), "ZZ", "r99a", "r99b"]) == 0
    b = (tmp_path / "briefs" / "ZZ.r99b.md").read_text()
    assert str(tmp_path / "annot" / "ZZ.r99b.jsonl") in b and "12 items" in b


def test_a_missing_writer_is_one_line_on_stderr(tmp_path, capsys):
    assert main(["annotator", str(tmp_path), "QQ", "r99a"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "QQ.jsonl" in err and "\n" not in err


def _delivery(tmp_path, kind="test"):
    """A file that keeps to the brief's quotas exactly."""
    from mbb.analysis.gold_briefs import STYLE_QUOTAS, label_quotas

    mains = [m for m, n in label_quotas(kind).items() for _ in range(n)]
    styles = [s for s, n in STYLE_QUOTAS[kind].items() for _ in range(n)]
    rows = []
    for i, (m, s) in enumerate(zip(mains, styles, strict=True), 1):
        ctx = {"speaker": "W1", "round": 1, "subrun": 1}
        if s == "context":
            ctx["in_reply_to"] = "W2: shall we?"
        rows.append(
            {
                "id": f"ZZ-{i:04d}",
                "writer": "ZZ",
                "style": s,
                "channel": "public",
                "text": f"line {i}",
                "labels": [] if m == "neutral" else [m],
                "main": m,
                "context": ctx,
            }
        )
    return rows


def _write(tmp_path, rows):
    raw = tmp_path / "raw" / "ZZ.jsonl"
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return raw


@pytest.mark.parametrize("kind", ["test", "dev"])
def test_a_delivery_that_keeps_to_its_brief_passes(tmp_path, kind):
    from mbb.analysis.gold_briefs import check_delivery

    assert check_delivery(_write(tmp_path, _delivery(tmp_path, kind)), kind) == []


def test_each_departure_from_the_brief_is_one_line(tmp_path, capsys):
    from mbb.analysis.gold_briefs import check_delivery

    rows = _delivery(tmp_path)
    rows.pop()  # a neutral item short
    rows[0]["labels"] = ["reciprocity"]  # its main is not among its labels
    rows[5]["channel"] = "ballot"  # a ballot with no ranking
    ctx_row = next(r for r in rows if r["style"] == "context")
    del ctx_row["context"]["in_reply_to"]
    rows[-1]["labels"] = ["anchoring"]  # a neutral item labelled
    problems = check_delivery(_write(tmp_path, rows))
    assert any(p.startswith("main neutral: 25 items") for p in problems)
    assert any("ZZ-0001: main anchoring is not among its labels" in p for p in problems)
    assert any("ZZ-0006: a ballot without a ranking" in p for p in problems)
    assert any(f"{ctx_row['id']}: context style without" in p for p in problems)
    assert any("neutral but labelled anchoring" in p for p in problems)
    assert main(["check", str(tmp_path), "ZZ"]) == 1
    assert "departures from the test brief" in capsys.readouterr().out


def test_a_style_a_few_items_off_its_quota_is_not_a_departure(tmp_path):
    from mbb.analysis.gold_briefs import check_delivery

    rows = _delivery(tmp_path)
    for r in [r for r in rows if r["style"] == "plain"][:3]:
        r["style"] = "terse"  # plain 12 -> 9, terse 11 -> 14: within the slack
    assert check_delivery(_write(tmp_path, rows)) == []
    for r in [r for r in rows if r["style"] == "plain"][:1]:
        r["style"] = "terse"  # one more: terse 15, plain 8
    assert len(check_delivery(_write(tmp_path, rows))) == 2


def test_contrast_pairs_cover_every_neighbour_the_definitions_name():
    import re

    from mbb.analysis.gold_briefs import CONTRAST_PAIRS
    from mbb.analysis.llm_classifier import GUIDE

    pairs = {frozenset(p) for p in CONTRAST_PAIRS}
    for name, (_, excludes, _) in GUIDE.items():
        for other in GUIDE:
            if other != name and re.search(rf"\b{other}\b", excludes):
                assert frozenset((name, other)) in pairs, (name, other)
    assert frozenset(("reciprocity", "coalition_loyalty")) in pairs  # measured, not named


def _contrast_delivery():
    from mbb.analysis.gold_briefs import CONTRAST_SETS_PER_PAIR, contrast_set_ids

    rows = []
    for i, (a, b, ids) in enumerate(contrast_set_ids("ZZ")):
        ballot = i % CONTRAST_SETS_PER_PAIR == 0
        for item_id, label in zip(ids, (a, b, "neutral"), strict=True):
            ctx = {"speaker": "W1", "round": 1, "subrun": 1}
            if ballot:
                ctx["ranking"] = ["W1", "W2", "W3", "W4", "W5"]
            rows.append(
                {
                    "id": item_id,
                    "writer": "ZZ",
                    "style": "ballot_ranking" if ballot else "plain",
                    "channel": "ballot" if ballot else "public",
                    "text": f"line {item_id}",
                    "labels": [] if label == "neutral" else [label],
                    "main": label,
                    "context": ctx,
                }
            )
    return rows


def test_a_contrast_brief_lists_its_sets_and_a_keeping_delivery_passes(tmp_path):
    from mbb.analysis.gold_briefs import CONTRAST_PAIRS, check_delivery, writer_brief

    brief = writer_brief("ZZ", "Ship's radio operators.", "/x/raw/ZZ.jsonl", "contrast")
    assert "exactly 117 items, in 39 contrast sets" in brief and "/x/raw/ZZ.jsonl" in brief
    assert all(f"`{a}` against `{b}`" in brief for a, b in CONTRAST_PAIRS)
    assert "Items ZZ-0109 to ZZ-0117: `reciprocity` against `coalition_loyalty`" in brief
    assert check_delivery(_write(tmp_path, _contrast_delivery()), "contrast") == []


def test_a_contrast_delivery_that_blurs_its_sets_is_named(tmp_path):
    from mbb.analysis.gold_briefs import check_delivery

    rows = _contrast_delivery()
    rows[1]["labels"].append(rows[0]["main"])  # the B item also carries A
    rows[9]["channel"] = "public"  # a pair's first set not all ballots
    rows[9]["context"].pop("ranking")
    rows[3]["style"] = "terse"  # a set in two styles
    rows[5]["main"], rows[5]["labels"] = (
        "reputation",
        ["reputation"],
    )  # neutral slot written for another
    problems = check_delivery(_write(tmp_path, rows), "contrast")
    assert "ZZ-0002: written for iterative_bargaining but also labelled anchoring" in problems
    assert (
        "ZZ-0010: the first set of reciprocity / welfare_concession is not all ballots" in problems
    )
    assert "ZZ-0004: set anchoring / iterative_bargaining in 2 styles" in problems
    assert "ZZ-0006: main reputation, its set asks for neutral" in problems

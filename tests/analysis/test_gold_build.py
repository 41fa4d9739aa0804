"""`python -m mbb.analysis.gold_build`: the gold files from the writers' corpus, author labels
until the blind annotations arrive, then the majority of three; the first round kept as is."""

from __future__ import annotations

import json
import shutil

import pytest

from mbb.analysis.agreement import FIRST_ROUND_WRITERS, GOLD_DIR, read_annotations
from mbb.analysis.corpus import CorpusError, read_utterances
from mbb.analysis.gold_build import build, main


def item(writer: str, n: int, labels: list[str], style: str = "terse") -> dict:
    return {
        "id": f"{writer}-{n:04d}",
        "writer": writer,
        "style": style,
        "channel": "public",
        "text": f"item {n} of {writer}",
        "labels": labels,
        "main": labels[0] if labels else "neutral",
        "context": {"speaker": "W1", "round": 1, "subrun": 1},
    }


def write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture
def setup(tmp_path):
    gold = tmp_path / "gold"
    gold.mkdir()
    shutil.copy(GOLD_DIR / "test.jsonl", gold / "test.jsonl")
    for f in ("dev.jsonl", "annotations.jsonl"):  # the first round's lines: the gold folder
        lines = (GOLD_DIR / f).read_text(encoding="utf-8").splitlines(keepends=True)
        first = [x for x in lines if json.loads(x)["id"].split("-", 1)[0] in set("ABCDEFGHIJ")]
        (gold / f).write_text("".join(first), encoding="utf-8")
    corpus = tmp_path / "corpus"
    write(corpus / "raw" / "K.jsonl", [item("K", 1, ["anchoring"]), item("K", 2, [])])
    write(
        corpus / "raw" / "Q.jsonl",
        [item("Q", 1, ["reciprocity", "reputation"], "context"), item("Q", 2, ["cheap_talk"])],
    )
    return corpus, gold


def old_lines(path):
    return [x for x in path.read_text().splitlines() if json.loads(x)["writer"] in set("ACDEGHIJ")]


def test_author_labels_until_the_blind_annotations_arrive(setup, capsys):
    corpus, gold = setup
    assert main([str(corpus), "--gold", str(gold)]) == 0
    out = capsys.readouterr().out
    assert "author labels only (fewer than two blind annotations yet) for: K, Q" in out
    assert "test2 writers not delivered yet: R" in out
    dev = read_utterances(gold / "dev.jsonl", require_labels=True)
    assert [u.id for u in dev[-2:]] == ["K-0001", "K-0002"] and dev[-1].style == "terse"
    # the first round's dev lines are kept byte for byte, and the first test split untouched
    assert old_lines(gold / "dev.jsonl") == old_lines(GOLD_DIR / "dev.jsonl")
    assert (gold / "test.jsonl").read_bytes() == (GOLD_DIR / "test.jsonl").read_bytes()
    test2 = read_utterances(gold / "test2.jsonl", require_labels=True)
    assert [(u.id, u.labels) for u in test2] == [
        ("Q-0001", ["reciprocity", "reputation"]),
        ("Q-0002", ["cheap_talk"]),
    ]
    ann = read_annotations(gold / "annotations.jsonl")
    assert ann["Q-0001"] == {"author": ["reciprocity", "reputation"]}
    # agreement covers the fully annotated items only: the first round's 2,432
    assert json.loads((gold / "agreement.json").read_text())["items"] == 2432


def test_the_majority_of_author_and_two_blind_annotators(setup):
    corpus, gold = setup
    write(
        corpus / "annot" / "Q.ann2.jsonl",
        [{"id": "Q-0001", "labels": ["reciprocity"]}, {"id": "Q-0002", "labels": []}],
    )
    write(
        corpus / "annot" / "Q.ann1.jsonl",
        [{"id": "Q-0002", "labels": ["cheap_talk"]}, {"id": "Q-0001", "labels": ["anchoring"]}],
    )
    s = build(corpus, gold)
    assert s["provisional"] == ["K"]
    test2 = {u.id: u.labels for u in read_utterances(gold / "test2.jsonl", require_labels=True)}
    assert test2 == {"Q-0001": ["reciprocity"], "Q-0002": ["cheap_talk"]}
    line = json.loads((gold / "annotations.jsonl").read_text().splitlines()[-2])
    assert line == {
        "id": "Q-0001",
        "author": ["reciprocity", "reputation"],
        "blind_1": ["anchoring"],
        "blind_1_by": "ann1",
        "blind_2": ["reciprocity"],
        "blind_2_by": "ann2",
    }
    assert json.loads((gold / "agreement.json").read_text())["items"] == 2434
    # re-running gives the same files
    before = {p.name: p.read_bytes() for p in gold.iterdir()}
    build(corpus, gold)
    assert {p.name: p.read_bytes() for p in gold.iterdir()} == before


def test_a_lone_blind_annotation_is_kept_without_a_vote(setup):
    """One blind annotation while the second is awaited: stored on the provisional lines (so
    delivered work lives in the gold folder), the gold labels still the author's alone."""
    corpus, gold = setup
    write(
        corpus / "annot" / "Q.ann1.jsonl",
        [{"id": "Q-0001", "labels": []}, {"id": "Q-0002", "labels": ["cheap_talk"]}],
    )
    s = build(corpus, gold)
    assert s["provisional"] == ["K", "Q"]
    test2 = {u.id: u.labels for u in read_utterances(gold / "test2.jsonl", require_labels=True)}
    assert test2 == {"Q-0001": ["reciprocity", "reputation"], "Q-0002": ["cheap_talk"]}
    line = json.loads((gold / "annotations.jsonl").read_text().splitlines()[-2])
    assert line == {
        "id": "Q-0001",
        "author": ["reciprocity", "reputation"],
        "provisional": True,
        "blind_1": [],
        "blind_1_by": "ann1",
    }
    ann = read_annotations(gold / "annotations.jsonl")
    assert ann["Q-0001"] == {"author": ["reciprocity", "reputation"]}  # no vote yet
    assert json.loads((gold / "agreement.json").read_text())["items"] == 2432


def test_a_corpus_that_would_drop_writers_is_an_error_before_anything_is_written(setup, tmp_path):
    """A mistyped or partial corpus path never empties the gold files."""
    corpus, gold = setup

    def files() -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in gold.iterdir()}

    before = files()
    with pytest.raises(CorpusError, match=r"no writer's file"):
        build(tmp_path / "no_such_corpus", gold)
    assert main([str(tmp_path / "typo"), "--gold", str(gold)]) == 2
    assert files() == before
    build(corpus, gold)  # K and Q are now in the gold folder...
    built = files()
    (corpus / "raw" / "K.jsonl").unlink()
    with pytest.raises(CorpusError, match=r"lacks writer\(s\) K whose items"):
        build(corpus, gold)  # ...so a corpus without K would drop them
    assert files() == built


def test_a_half_written_annotation_file_is_an_error(setup, capsys):
    corpus, gold = setup
    write(corpus / "annot" / "K.a.jsonl", [{"id": "K-0001", "labels": []}])
    with pytest.raises(CorpusError, match=r"K\.a\.jsonl: annotates 1 ids, the writer has 2"):
        build(corpus, gold)
    write(corpus / "annot" / "K.a.jsonl", [{"id": "K-0001", "labels": ["bribery"]}])
    assert main([str(corpus), "--gold", str(gold)]) == 2
    assert "unknown category 'bribery'" in capsys.readouterr().err


def test_writer_and_style_are_checked(setup):
    corpus, gold = setup
    write(corpus / "raw" / "L.jsonl", [item("K", 9, [])])
    with pytest.raises(CorpusError, match="has writer 'K', not 'L'"):
        build(corpus, gold)
    write(corpus / "raw" / "L.jsonl", [{**item("L", 1, []), "style": "haiku"}])
    with pytest.raises(CorpusError, match=r"L\.jsonl:1: style: Input should be"):
        build(corpus, gold)
    (corpus / "raw" / "L.jsonl").unlink()
    write(corpus / "raw" / "B.jsonl", [item("B", 1, [])])
    with pytest.raises(CorpusError, match="first-round writers"):
        build(corpus, gold)


def test_unpack_then_build_gives_the_gold_folder_back_byte_for_byte(tmp_path):
    """The gold folder in git is the only copy a round needs: the corpus folder comes back from
    it (`--unpack`), and building from that reproduces every gold file."""
    from mbb.analysis.gold_build import unpack

    gold = tmp_path / "gold"
    shutil.copytree(GOLD_DIR, gold)
    counts = unpack(gold, tmp_path / "corpus")
    later = [
        i
        for i in read_annotations(gold / "annotations.jsonl")
        if i.split("-", 1)[0] not in FIRST_ROUND_WRITERS
    ]
    assert sum(counts.values()) == len(later)
    # one annot file per blind annotator (round 13's CA was adjudicated: two)
    assert len(list((tmp_path / "corpus" / "annot").glob("CA.*.jsonl"))) == 2
    build(tmp_path / "corpus", gold)
    for f in sorted(GOLD_DIR.iterdir()):
        if f.is_file():
            assert (gold / f.name).read_bytes() == f.read_bytes(), f.name


def test_unpack_never_overwrites_a_corpus(tmp_path, capsys):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "K.jsonl").write_text("keep me\n")
    assert main(["--unpack", str(tmp_path)]) == 2
    assert "already holds K.jsonl" in capsys.readouterr().err
    assert (tmp_path / "raw" / "K.jsonl").read_text() == "keep me\n"


def test_a_corrupt_gold_line_is_named_by_file_and_line(tmp_path, capsys):
    gold = tmp_path / "gold"
    shutil.copytree(GOLD_DIR, gold)
    lines = (gold / "test14.jsonl").read_text().splitlines(keepends=True)
    lines[3] = lines[3][:40] + "\n"  # a line cut short
    (gold / "test14.jsonl").write_text("".join(lines))
    assert main(["--unpack", str(tmp_path / "corpus"), "--gold", str(gold)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "test14.jsonl:4: not a gold line" in err
    assert "\n" not in err
    assert not (tmp_path / "corpus" / "raw").exists()  # nothing half-written

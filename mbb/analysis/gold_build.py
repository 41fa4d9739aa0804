"""Building the gold files from the writers' corpus: one command, re-run whenever a writer or an
annotator delivers.

    python -m mbb.analysis.gold_build CORPUS_DIR [--gold DIR]

CORPUS_DIR holds `raw/<WRITER>.jsonl` (a writer's items in the corpus format of
`mbb.analysis.corpus`, each with the author's own `labels` and a `style`) and, once they exist,
the blind annotations `annot/<WRITER>.<annotator>.jsonl` (lines `{"id": ..., "labels": [...]}`;
`blind/<WRITER>.jsonl`, the label-free copies the annotators read, is not read). For every
writer found it writes, into the gold folder:
- `dev.jsonl`: the dev split. The first round's items (writers A-J, no `style`) are kept byte for
  byte; the new dev writers' items follow, writer by writer, in their file's order.
- `test2.jsonl`, `test3.jsonl`, …: the later frozen test splits, one per writer pair that
  `TEST_SPLITS` (in `mbb.analysis.agreement`) names, each drawn before any training on its
  round's writers. Their items (everything but the labels) are pinned by hash in
  `tests/analysis/test_gold.py`; only the adjudicated labels may change, when the blind
  annotations arrive.
- `annotations.jsonl`: every annotator's labels per item (`author`, and `blind_1`, `blind_2` with
  `blind_1_by` / `blind_2_by` naming the annotators, sorted by name).
- `agreement.json`: pairwise Cohen's kappa per category over the items with all three
  annotations (`python -m mbb.analysis.agreement` recomputes it alone).

Adjudication is the first round's: a label stays when a majority of the item's annotators give
it (two of author + two blind). Until a writer's blind annotations arrive its items carry the
author's labels alone, marked `provisional` in `annotations.jsonl`; the command prints which
writers are provisional. A writer's one blind annotation, while the second is awaited, is kept
on its provisional lines (`blind_1`, `blind_1_by`) without a vote, so delivered work lives in
the gold folder and not only in CORPUS_DIR. The first test split (`test.jsonl`, writers B and
F) is never touched.
Malformed input is an error naming the file and line; an annotation file that does not cover
its writer's ids exactly is an error (a file still being written is not silently half-used);
a corpus folder with no writer, or without a later-round writer the gold folder holds, is an
error before anything is written (a mistyped path never empties the gold files).

    python -m mbb.analysis.gold_build --unpack CORPUS_DIR [--gold DIR]

goes the other way: it writes the corpus folder back from the gold folder (every later-round
writer's `raw/` file with its author's labels, and one `annot/` file per blind annotator), so
the gold folder in git is the only copy a round needs; building from the unpacked folder
gives the gold files back byte for byte (a test checks it).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mbb.analysis.agreement import (
    FIRST_ROUND_WRITERS,
    GOLD_DIR,
    TEST_SPLITS,
    adjudicate,
    agreement,
    read_annotations,
)
from mbb.analysis.corpus import CorpusError, parse_lines
from mbb.core.taxonomy import ALL_LABELS

__all__ = ["FIRST_ROUND_WRITERS", "TEST_SPLITS", "build", "main", "unpack"]

_SPLIT_OF = {w: name for name, ws in TEST_SPLITS.items() for w in ws}


def _annotation_files(corpus: Path, writer: str) -> dict[str, Path]:
    """annotator -> file, for one writer (annot/<WRITER>.<annotator>.jsonl)."""
    return {
        p.name[len(writer) + 1 : -len(".jsonl")]: p
        for p in sorted((corpus / "annot").glob(f"{writer}.*.jsonl"))
    }


def _read_blind(path: Path, ids: Sequence[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            i, labels = str(d["id"]), list(d["labels"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CorpusError(f"{path}:{n}: not an annotation line ({exc})") from None
        bad = [x for x in labels if x not in ALL_LABELS]
        if bad:
            raise CorpusError(
                f"{path}:{n}: unknown category {bad[0]!r}; valid: {', '.join(ALL_LABELS)}"
            )
        if i in out:
            raise CorpusError(f"{path}:{n}: id {i!r} annotated twice")
        out[i] = sorted(set(labels))
    missing, extra = set(ids) - set(out), set(out) - set(ids)
    if missing or extra:
        raise CorpusError(
            f"{path}: annotates {len(out)} ids, the writer has {len(ids)} "
            f"({len(missing)} missing, e.g. {sorted(missing)[:3]}; {len(extra)} unknown, "
            f"e.g. {sorted(extra)[:3]})"
        )
    return out


def _writer_items(corpus: Path, writer: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(items with adjudicated labels, annotation lines) for one writer's raw file."""
    path = corpus / "raw" / f"{writer}.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    parsed = parse_lines(lines, str(path), require_labels=True)  # validates every line
    raw = [json.loads(x) for x in lines if x.strip()]
    for u in parsed:
        if u.writer != writer:
            raise CorpusError(f"{path}: item {u.id} has writer {u.writer!r}, not {writer!r}")
        if u.style is None:
            raise CorpusError(f"{path}: item {u.id} has no style")
    ids = [u.id for u in parsed]
    blind = {name: _read_blind(p, ids) for name, p in _annotation_files(corpus, writer).items()}
    names = sorted(blind)[:2] if len(blind) >= 2 else []
    items, ann = [], []
    for d, u in zip(raw, parsed, strict=True):
        a: dict[str, Any] = {"id": u.id, "author": u.labels or []}
        if names:
            for k, name in enumerate(names, 1):
                a[f"blind_{k}"] = blind[name][u.id]
                a[f"blind_{k}_by"] = name
        else:
            a["provisional"] = True  # author only, until two blind annotations arrive
            if blind:  # a lone one is kept, not voted: no delivered work is lost
                ((name, labels),) = blind.items()
                a["blind_1"], a["blind_1_by"] = labels[u.id], name
        votes: dict[str, list[str]] = (
            {k: a[k] for k in ("author", "blind_1", "blind_2")}
            if names
            else {"author": a["author"]}
        )
        items.append({**d, "labels": adjudicate(votes)})
        ann.append(a)
    return items, ann


def _dump(rows: Sequence[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def build(corpus: str | Path, gold: str | Path = GOLD_DIR) -> dict[str, Any]:
    """Write dev.jsonl, the later test splits, annotations.jsonl and agreement.json (see the
    module docstring); returns a summary: writers per split and which are provisional.

    `corpus`: the writers' folder (raw/, annot/); `gold`: the gold folder to write."""
    corpus, gold = Path(corpus), Path(gold)
    writers = sorted(p.stem for p in (corpus / "raw").glob("*.jsonl"))
    if not writers:
        raise CorpusError(f"{corpus / 'raw'}: no writer's file (<WRITER>.jsonl) there")
    clash = [w for w in writers if w in FIRST_ROUND_WRITERS]
    if clash:
        raise CorpusError(f"{corpus / 'raw'}: writer(s) {clash} are first-round writers")
    new = set(writers)
    # the build rewrites every later-round writer's lines: one the corpus lacks would be dropped
    kept = {
        i.split("-", 1)[0]
        for i in read_annotations(gold / "annotations.jsonl")
        if i.split("-", 1)[0] not in FIRST_ROUND_WRITERS
    }
    if kept - new:
        raise CorpusError(
            f"{corpus / 'raw'}: lacks writer(s) {', '.join(sorted(kept - new))} whose items "
            f"{gold} holds; the build would drop them (give the whole corpus)"
        )
    old_dev = [
        x
        for x in (gold / "dev.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        if x.strip() and json.loads(x).get("writer") in FIRST_ROUND_WRITERS
    ]
    new_ids: set[str] = set()
    old_ann = [
        x
        for x in (gold / "annotations.jsonl").read_text(encoding="utf-8").splitlines(True)
        if x.strip() and json.loads(x)["id"].split("-", 1)[0] in FIRST_ROUND_WRITERS
    ]
    dev_new: list[dict[str, Any]] = []
    tests: dict[str, list[dict[str, Any]]] = {name: [] for name in TEST_SPLITS}
    ann_new: list[dict[str, Any]] = []
    provisional = []
    for w in writers:
        items, ann = _writer_items(corpus, w)
        dup = new_ids & {d["id"] for d in items}
        if dup:
            where = corpus / "raw" / f"{w}.jsonl"
            raise CorpusError(f"{where}: ids also used elsewhere: {sorted(dup)[:3]}")
        new_ids |= {d["id"] for d in items}
        (tests[_SPLIT_OF[w]] if w in _SPLIT_OF else dev_new).extend(items)
        ann_new.extend(ann)
        if any(a.get("provisional") for a in ann):
            provisional.append(w)
    (gold / "dev.jsonl").write_text("".join(old_dev) + _dump(dev_new), encoding="utf-8")
    for name, rows in tests.items():
        if rows:  # a split none of whose writers delivered yet is left as it is
            (gold / f"{name}.jsonl").write_text(_dump(rows), encoding="utf-8")
    (gold / "annotations.jsonl").write_text("".join(old_ann) + _dump(ann_new), encoding="utf-8")
    result = agreement(read_annotations(gold / "annotations.jsonl"), list(ALL_LABELS))
    (gold / "agreement.json").write_text(json.dumps(result, indent=1) + "\n")
    return {
        "dev_writers": sorted(new - set(_SPLIT_OF)),
        "dev_items_new": len(dev_new),
        "tests": {
            name: {
                "writers": sorted(new & set(ws)),
                "missing": sorted(set(ws) - new),
                "items": len(tests[name]),
            }
            for name, ws in TEST_SPLITS.items()
        },
        "provisional": provisional,
    }


def unpack(gold: str | Path, corpus: str | Path) -> dict[str, int]:
    """Write the corpus folder `build` reads back from a gold folder: `raw/<WRITER>.jsonl` for
    every later-round writer (its items in gold order, with the author's labels) and
    `annot/<WRITER>.<annotator>.jsonl` for each blind annotation kept; returns items per
    writer. Refuses a corpus folder that already has a raw file (nothing is overwritten).

    `gold`: the gold folder to read; `corpus`: the folder to write."""
    gold, corpus = Path(gold), Path(corpus)
    taken = sorted((corpus / "raw").glob("*.jsonl"))
    if taken:
        raise CorpusError(
            f"{corpus / 'raw'}: already holds {taken[0].name}; unpack into a new folder"
        )
    ann = {a["id"]: a for a in _annotation_lines(gold / "annotations.jsonl")}
    by_writer: dict[str, list[dict[str, Any]]] = {}
    files = ["dev.jsonl", *(f"{name}.jsonl" for name in TEST_SPLITS)]
    for name in files:
        path = gold / name
        if not path.is_file():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            d = _gold_line(path, n, line)
            writer = str(d["id"]).split("-", 1)[0]
            if writer in FIRST_ROUND_WRITERS:
                continue
            if d["id"] not in ann:
                raise CorpusError(f"{path}:{n}: {d['id']} has no line in annotations.jsonl")
            by_writer.setdefault(writer, []).append({**d, "labels": ann[d["id"]]["author"]})
    (corpus / "raw").mkdir(parents=True, exist_ok=True)
    (corpus / "annot").mkdir(parents=True, exist_ok=True)
    for writer, rows in by_writer.items():
        (corpus / "raw" / f"{writer}.jsonl").write_text(_dump(rows), encoding="utf-8")
        blind: dict[str, list[dict[str, Any]]] = {}
        for d in rows:
            a = ann[d["id"]]
            for k in ("blind_1", "blind_2"):
                if k in a:
                    blind.setdefault(a[f"{k}_by"], []).append({"id": d["id"], "labels": a[k]})
        for name, lines in blind.items():
            (corpus / "annot" / f"{writer}.{name}.jsonl").write_text(_dump(lines))
    return {w: len(rows) for w, rows in by_writer.items()}


def _annotation_lines(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [_gold_line(path, n, x) for n, x in enumerate(lines, 1) if x.strip()]


def _gold_line(path: Path, n: int, line: str) -> dict[str, Any]:
    """One JSON object with an `id`, or a CorpusError naming the file and line."""
    try:
        d = json.loads(line)
        if not isinstance(d, dict) or "id" not in d:
            raise ValueError("no id")
    except ValueError as exc:
        raise CorpusError(f"{path}:{n}: not a gold line ({exc})") from None
    return d


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mbb.analysis.gold_build")
    ap.add_argument("corpus", help="folder with raw/<WRITER>.jsonl (and annot/)")
    ap.add_argument("--gold", default=str(GOLD_DIR), help="gold folder to write (or read)")
    ap.add_argument(
        "--unpack", action="store_true", help="write the corpus folder from the gold folder"
    )
    args = ap.parse_args(argv)
    if args.unpack:
        try:
            counts = unpack(args.gold, args.corpus)
        except (CorpusError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"{args.corpus}: {len(counts)} writers, {sum(counts.values())} items unpacked")
        return 0
    try:
        s = build(args.corpus, args.gold)
    except (CorpusError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"dev: +{s['dev_items_new']} items from {', '.join(s['dev_writers']) or 'no new writer'}; "
        + "; ".join(
            f"{name}: {t['items']} items from {', '.join(t['writers']) or 'nobody'}"
            for name, t in s["tests"].items()
        )
    )
    for name, t in s["tests"].items():
        if t["missing"]:
            print(f"{name} writers not delivered yet: {', '.join(t['missing'])}")
    if s["provisional"]:
        print(
            "author labels only (fewer than two blind annotations yet) for: "
            + ", ".join(s["provisional"])
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

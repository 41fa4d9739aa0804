"""Inter-annotator agreement of the gold corpus (`mbb/analysis/gold/`), and its adjudication.

How the corpus was made (mbb's procedure; the paper labels with an LLM and reviews by hand):
authors each writing in a style of their own from the setting and the category definitions
only (none saw mbb's cues, personas or code) wrote ~240 utterances each. Every item was labelled
three times, independently: by its author and by two blind annotators (`blind_1`, `blind_2`).
`blind_2` always read the items shuffled and renumbered; `blind_1` read them in the author's
order for writers A-F (`blind_1_order: author` — that order groups items by category and can
leak the intended label) and shuffled for the later writers. The gold label set is the
majority of the three (a label stays when at least two give it). Writers B and F form the frozen
test split, drawn before any item was read; all other writers the dev split.

All annotators were instances of one family of LLM assistants, briefed alike: their kappa
measures how consistently the written definitions are applied, and overstates what independent
human annotators would reach.

The second round (writers K-R, `mbb.analysis.gold_build`) adds items with a `style`; until their
blind annotations arrive they carry the author's labels alone (`provisional` lines, one
annotator), and the agreement figures cover the items with all three annotations.

`python -m mbb.analysis.agreement` rewrites `gold/agreement.json` from `gold/annotations.jsonl`.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from mbb.analysis.validation import cohen_kappa
from mbb.core import safejson

__all__ = [
    "ANNOTATORS",
    "FIRST_ROUND_WRITERS",
    "GOLD_DIR",
    "TEST_SPLITS",
    "adjudicate",
    "agreement",
    "read_annotations",
]

GOLD_DIR = Path(__file__).resolve().parent / "gold"
# the gold folder's layout (here, not in gold_build, so reading it never loads the builder)
FIRST_ROUND_WRITERS = frozenset("ABCDEFGHIJ")  # the first corpus: dev A C D E G-J, test B F
# the later frozen test splits and their writers: the second round's K-R (test2: Q, R), the
# third round's S-V, X-Z (test3: Y, Z), the fourth round's AA-AH (test4: AC, AH), the fifth's
# AI-AP (test5: AI, AP), the sixth's AQ-AW (test6: AS, AV), the seventh's AX-BB (test7: AX, AY),
# the eighth's BC-BF (test8: BC, BD), the ninth's BG-BK (test9: BG, BH), the tenth's BL-BP
# (test10: BL, BM), the eleventh's BQ-BU (test11: BQ, BR), the twelfth's BV-BZ (test12: BV,
# BW), the thirteenth's CA-CE (test13: CA, CB), the fourteenth's CF-CI (test14: CF, CG), the
# fifteenth's CJ-CO (test15: CJ, CK), the sixteenth's CP-CQ (test16: CP, CQ), the
# seventeenth's CR-CS (test17: CR, CS), the eighteenth's CT-CU (test18: CT, CU), the
# nineteenth's CV-CW (test19: CV, CW), the twentieth's CX-CY (test20: CX, CY), the
# twenty-first's CZ-DG (test21: CZ, DA), the twenty-second's DH-DQ (test22: DH, DI), the
# twenty-third's DR-DS (test23: DR, DS), the twenty-fourth's DT-EC (test24: DT, DU), the
# twenty-fifth's ED-EE (test25: ED, EE), the twenty-sixth's EF-EG (test26: EF, EG), the
# twenty-seventh's EH-EI (test27: EH, EI), the twenty-eighth's EJ-EK (test28: EJ, EK), the
# twenty-ninth's EL-EM (test29: EL, EM), the thirtieth's EN-EO (test30: EN, EO), the
# thirty-first's EP-EW (test31: EV, EW; EP-EU dev, on branch cand34); each pair chosen before
# any of its round's items was read (the fourth's, fifth's and sixth's drawn at random before
# anyone wrote, the seventh's to thirty-first's named before anyone wrote)
TEST_SPLITS: dict[str, tuple[str, ...]] = {
    "test2": ("Q", "R"),
    "test3": ("Y", "Z"),
    "test4": ("AC", "AH"),
    "test5": ("AI", "AP"),
    "test6": ("AS", "AV"),
    "test7": ("AX", "AY"),
    "test8": ("BC", "BD"),
    "test9": ("BG", "BH"),
    "test10": ("BL", "BM"),
    "test11": ("BQ", "BR"),
    "test12": ("BV", "BW"),
    "test13": ("CA", "CB"),
    "test14": ("CF", "CG"),
    "test15": ("CJ", "CK"),
    "test16": ("CP", "CQ"),
    "test17": ("CR", "CS"),
    "test18": ("CT", "CU"),
    "test19": ("CV", "CW"),
    "test20": ("CX", "CY"),
    "test21": ("CZ", "DA"),
    "test22": ("DH", "DI"),
    "test23": ("DR", "DS"),
    "test24": ("DT", "DU"),
    "test25": ("ED", "EE"),
    "test26": ("EF", "EG"),
    "test27": ("EH", "EI"),
    "test28": ("EJ", "EK"),
    "test29": ("EL", "EM"),
    "test30": ("EN", "EO"),
    "test31": ("EV", "EW"),
}
ANNOTATORS = ("author", "blind_1", "blind_2")
PAIRS = (("author", "blind_2"), ("author", "blind_1"), ("blind_1", "blind_2"))


def read_annotations(
    path: Path = GOLD_DIR / "annotations.jsonl",
) -> dict[str, dict[str, list[str]]]:
    """id -> annotator -> labels, from `path` (one JSON object per line): all three annotators,
    or the author alone on a line marked `provisional` (blind annotations not yet delivered)."""
    out: dict[str, dict[str, list[str]]] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = safejson.loads(line)
            who = ("author",) if d.get("provisional") else ANNOTATORS
            out[d["id"]] = {a: list(d[a]) for a in who}
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{n}: not an annotation line ({exc})") from None
    return out


def adjudicate(annotations: dict[str, list[str]]) -> list[str]:
    """The gold labels of one item: every label a majority of its annotators gave (two of the
    three; the author's own when it is the only annotator so far)."""
    votes = Counter(label for labels in annotations.values() for label in set(labels))
    need = len(annotations) // 2 + 1
    return sorted(label for label, n in votes.items() if n >= need)


def agreement(
    annotations: dict[str, dict[str, list[str]]], categories: list[str]
) -> dict[str, Any]:
    """Cohen's kappa per category for each pair of annotators, with each one's positives and
    the adjudicated count; `categories`: the labels to report (plus a `neutral` row: no label).
    Only items with all three annotations count."""
    ids = sorted(i for i, a in annotations.items() if all(x in a for x in ANNOTATORS))
    rows = []
    for cat in [*categories, "neutral"]:

        def has(annotator: str, cat: str = cat) -> np.ndarray:
            if cat == "neutral":
                return np.array([not annotations[i][annotator] for i in ids])
            return np.array([cat in annotations[i][annotator] for i in ids])

        gold = [adjudicate(annotations[i]) for i in ids]
        row: dict[str, Any] = {
            "category": cat,
            "gold_n": sum((not g) if cat == "neutral" else (cat in g) for g in gold),
        }
        for a in ANNOTATORS:
            row[f"{a}_n"] = int(has(a).sum())
        for a, b in PAIRS:
            k = cohen_kappa(has(a), has(b))
            row[f"kappa_{a}_vs_{b}"] = None if k is None else round(k, 4)
        rows.append(row)
    return {"items": len(ids), "annotators": list(ANNOTATORS), "categories": rows}


def main() -> None:
    from mbb.core.taxonomy import ALL_LABELS

    result = agreement(read_annotations(), list(ALL_LABELS))
    (GOLD_DIR / "agreement.json").write_text(json.dumps(result, indent=1) + "\n")
    for row in result["categories"]:
        print(f"{row['category']:26s} kappa(author, blind_2) {row['kappa_author_vs_blind_2']}")


if __name__ == "__main__":
    main()

"""Synthetic event logs whose negotiation text is drawn from the gold corpus (dev split) by the
corpus's own labels, with knobs that plant an effect: the rate of forward-looking deals, of rules
stated in later subruns, of fresh (vs repeated) wording in later subruns, and of metagaming.

The text is not generated from any measure's rules: an item is picked by its gold label, so a
measure detects a planted effect only as far as it reads the annotators' categories right.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

import numpy as np

from mbb.analysis.gold_eval import GOLD_DIR

# items whose labels are all in here are filler: no rule, deal, coalition or metagaming
_FILLER_OK = {
    "anchoring",
    "cheap_talk",
    "iterative_bargaining",
    "price_primary",
    "risk_variance",
    "scope_reduction",
    "welfare_concession",
    "downstream_gating",
    "deadline_ultimatum",
    "shortest_job_first",
    "earliest_deadline_first",
}


@cache
def pools() -> dict[str, tuple[str, ...]]:
    """Texts of the gold dev split by role: rule, deal (reciprocity / coalition formation,
    forward-looking arrangements), metagaming, filler."""
    out: dict[str, list[str]] = {"rule": [], "deal": [], "meta": [], "filler": []}
    with (GOLD_DIR / "dev.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            item = json.loads(line)
            labels = set(item["labels"] or [])
            if "rule_making_citation" in labels:
                out["rule"].append(item["text"])
            elif labels & {"reciprocity", "coalition_formation"}:
                out["deal"].append(item["text"])
            elif "metagaming" in labels:
                out["meta"].append(item["text"])
            elif labels <= _FILLER_OK:
                out["filler"].append(item["text"])
    return {k: tuple(v) for k, v in out.items()}


@dataclass(frozen=True)
class Knobs:
    """Per message: the chance it is a deal, a rule (later subruns only), metagaming; in later
    subruns, the chance a filler message is fresh rather than a repeat of the run's earlier
    text."""

    deal: float = 0.0
    rule_later: float = 0.0
    meta: float = 0.0
    fresh_later: float = 1.0


def synthetic_run(Log, run_id: str, knobs: Knobs, rng: np.random.Generator, *, subruns=3, rounds=3):
    """One run of four scripted workers: per round each posts one public message chosen by the
    knobs; notes and ballot reasoning are empty, bids random."""
    p = pools()
    workers = ["W1", "W2", "W3", "W4"]
    log = Log(run_id)
    log.run_started(
        run_id.split("-seed")[0],
        [(w, "price_first", 1000, 1500.0) for w in workers],
        subruns=subruns,
    )
    said: list[str] = []
    for s in range(1, subruns + 1):
        log.subrun_started(s, dict.fromkeys(workers, 1000), dict.fromkeys(workers, 1500.0))
        for r in range(1, rounds + 1):
            msgs = []
            for w in workers:
                u = rng.random()
                if u < knobs.deal:
                    text = p["deal"][rng.integers(len(p["deal"]))]
                elif u < knobs.deal + knobs.meta:
                    text = p["meta"][rng.integers(len(p["meta"]))]
                elif s > 1 and u < knobs.deal + knobs.meta + knobs.rule_later:
                    text = p["rule"][rng.integers(len(p["rule"]))]
                elif s > 1 and said and rng.random() >= knobs.fresh_later:
                    text = said[rng.integers(len(said))]
                else:
                    text = p["filler"][rng.integers(len(p["filler"]))]
                said.append(text)
                msgs.append((w, None, text))
            bids = {w: int(rng.integers(10, 200)) for w in workers}
            order = sorted(workers, key=lambda w: -bids[w])
            log.round(
                s,
                r,
                workers,
                {w: (bids[w], 60, "") for w in workers},
                msgs,
                {w: (order, "") for w in workers},
                order,
                [bids[w] for w in order],
            )
    return log

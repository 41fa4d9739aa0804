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


# the conventions a fixed rule list would know; a rule item labelled with none is "invented"
_CONVENTIONS = {
    "earliest_deadline_first",
    "shortest_job_first",
    "recency_first",
    "tie_break_deference",
    "price_primary",
}


@cache
def pools(split: str = "dev") -> dict[str, tuple[str, ...]]:
    """Texts of a gold split by role: rule, deal (reciprocity / coalition formation,
    forward-looking arrangements), metagaming, filler; and `invented`: the rule items labelled
    with none of the fixed conventions (EDF, SJF, arrival, tie-break, price)."""
    out: dict[str, list[str]] = {"rule": [], "deal": [], "meta": [], "filler": [], "invented": []}
    with (GOLD_DIR / f"{split}.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            item = json.loads(line)
            labels = set(item["labels"] or [])
            if "rule_making_citation" in labels:
                out["rule"].append(item["text"])
                if not labels & _CONVENTIONS:
                    out["invented"].append(item["text"])
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
    text.

    Rule transmission: `rule_any`, the chance a message is a rule item in any subrun (checked
    after deal and metagaming); `rule_carry`, the chance a worker restates each rule item it
    posted in subrun s, word for word, in a random round of s+1; `rule_pool`, the pool rule
    items come from ("rule" or "invented"); `split`, the gold split all text comes from (the
    rule detector's cues were written from "dev")."""

    deal: float = 0.0
    rule_later: float = 0.0
    meta: float = 0.0
    fresh_later: float = 1.0
    rule_any: float = 0.0
    rule_carry: float = 0.0
    rule_pool: str = "rule"
    split: str = "dev"


def synthetic_run(Log, run_id: str, knobs: Knobs, rng: np.random.Generator, *, subruns=3, rounds=3):
    """One run of four scripted workers: per round each posts one public message chosen by the
    knobs; notes and ballot reasoning are empty, bids random."""
    p = pools(knobs.split)
    rules = p[knobs.rule_pool]
    carry: dict[tuple[int, int, str], str] = {}  # (subrun, round, worker) -> restated rule item
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
        stated: list[tuple[str, str]] = []  # (worker, rule item) posted in this subrun
        for r in range(1, rounds + 1):
            msgs = []
            for w in workers:
                u = rng.random()
                if (s, r, w) in carry:
                    text = carry[(s, r, w)]
                    stated.append((w, text))
                elif u < knobs.deal:
                    text = p["deal"][rng.integers(len(p["deal"]))]
                elif u < knobs.deal + knobs.meta:
                    text = p["meta"][rng.integers(len(p["meta"]))]
                elif u < knobs.deal + knobs.meta + (knobs.rule_later if s > 1 else 0.0) or (
                    knobs.rule_any and u < knobs.deal + knobs.meta + knobs.rule_any
                ):
                    text = rules[rng.integers(len(rules))]
                    stated.append((w, text))
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
        if knobs.rule_carry:
            for w, text in stated:
                if rng.random() < knobs.rule_carry:
                    carry[(s + 1, int(rng.integers(1, rounds + 1)), w)] = text
    return log

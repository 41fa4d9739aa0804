"""Synthetic event logs whose negotiation text is drawn from the gold corpus by the corpus's own
labels (from the dev split by default; the tests use the held-out test split, since the
detectors' cues were written and the classifier trained on dev), with knobs that plant an
effect: the rate of forward-looking deals, of rules stated in later subruns (or in any subrun,
carried to the next), of fresh (vs repeated) wording in later subruns, and of metagaming; and
(`extended_run`, the behaviour knobs) relational items placed by the round's bid level, a
label whose rate changes over subruns, deals of one label, private messages and LLM workers.

The text is not generated from any measure's rules: an item is picked by its gold label, so a
measure detects a planted effect only as far as it reads the annotators' categories right.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

import numpy as np

from mbb.analysis.gold_eval import GOLD_DIR
from mbb.core.taxonomy import CATEGORIES

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

_RELATIONAL = frozenset(c.name for c in CATEGORIES if c.marker == "relational")
# what SCARCE's agents invented on top of the operator's auction (§6): reciprocity debts,
# reputation and tie-breaks
_INSTITUTIONS = frozenset({"reciprocity", "reputation", "tie_break_deference"})


@cache
def pools(split: str = "dev") -> dict[str, tuple[str, ...]]:
    """Texts of a gold split by role: rule, deal (reciprocity / coalition formation,
    forward-looking arrangements), metagaming, filler; `invented`: the rule items labelled
    with none of the fixed conventions (EDF, SJF, arrival, tie-break, price); `relational`:
    items with any relational label; `institution`: items labelled reciprocity, reputation or
    tie-break deference; and one pool per label (the items carrying it)."""
    roles = ("rule", "deal", "meta", "filler", "invented", "relational", "institution")
    out: dict[str, list[str]] = {k: [] for k in roles}
    with (GOLD_DIR / f"{split}.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            item = json.loads(line)
            labels = set(item["labels"] or [])
            for lab in labels:
                out.setdefault(lab, []).append(item["text"])
            if labels & _RELATIONAL:
                out["relational"].append(item["text"])
            if labels & _INSTITUTIONS:
                out["institution"].append(item["text"])
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
    # --- rule knobs (the rule path of `synthetic_run`) ---
    # per message, the chance of a rule item in any subrun (on top of `rule_later`)
    rule_any: float = 0.0
    # chance a rule item a worker stated in subrun s is restated by it in s+1
    rule_carry: float = 0.0
    # "rule": any gold rule item; "invented": rule items naming none of the fixed conventions
    rule_pool: str = "rule"
    # --- behaviour knobs (`extended_run`; the defaults leave `synthetic_run` as it was) ---
    # gold split the text is drawn from: "test" is held out from the classifier's training
    split: str = "dev"
    # per message, the chance it is relational (an item labelled with a category whose taxonomy
    # marker is relational) in a round whose bid level is low / high
    relational_low: float = 0.0
    relational_high: float = 0.0
    # a label ("relational" = any relational one) whose per-message chance goes linearly from
    # `cat_first` in the first subrun to `cat_last` in the last
    cat: str | None = None
    cat_first: float = 0.0
    cat_last: float = 0.0
    # deals (the `deal` knob) only from items carrying this label; None: reciprocity or coalition
    deal_label: str | None = None
    # chance a deal or relational message is sent privately to another worker
    private: float = 0.0
    # "llm": the workers are LLM negotiators (their mandates: what the condition's rules impose);
    # "mixed": W1 and W2 are, W3 and W4 are scripted
    negotiator: str = "scripted"
    # the workers' persona (scripted workers: its code's categories are mandated)
    persona: str = "price_first"


_BEHAVIOUR_KNOBS = (
    "split",
    "relational_low",
    "relational_high",
    "cat",
    "cat_first",
    "cat_last",
    "deal_label",
    "private",
    "negotiator",
    "persona",
)
_RULE_KNOBS = ("rule_any", "rule_carry", "rule_pool")
_DEFAULT = Knobs()


def _post_round(log, s: int, r: int, bids: dict[str, int], msgs: list) -> None:
    """Log one round: every worker declares its bid for 60 s with an empty note, the messages,
    and ballots (and the schedule) in bid order."""
    workers = list(bids)
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


def synthetic_run(Log, run_id: str, knobs: Knobs, rng: np.random.Generator, *, subruns=3, rounds=3):
    """One run of four scripted workers: per round each posts one public message chosen by the
    knobs; notes and ballot reasoning are empty, bids random. With a rule knob set, rules can
    be stated in any subrun and carried to the next; with another behaviour knob set (the text
    split included), the run is an `extended_run`."""
    rule_path = any(getattr(knobs, f) != getattr(_DEFAULT, f) for f in _RULE_KNOBS)
    if not rule_path and any(getattr(knobs, f) != getattr(_DEFAULT, f) for f in _BEHAVIOUR_KNOBS):
        return extended_run(Log, run_id, knobs, rng, subruns=subruns, rounds=rounds)
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
            _post_round(log, s, r, {w: int(rng.integers(10, 200)) for w in workers}, msgs)
        if knobs.rule_carry:
            for w, text in stated:
                if rng.random() < knobs.rule_carry:
                    carry[(s + 1, int(rng.integers(1, rounds + 1)), w)] = text
    return log


def extended_run(Log, run_id: str, knobs: Knobs, rng: np.random.Generator, *, subruns=3, rounds=3):
    """One run of four workers with the behaviour knobs: every round has a bid level drawn
    uniformly in [0, 1] (each worker bids 10 + 190 x (level + noise), so rounds differ in mean
    bid), and per message, in this order, the chance of a relational item (by the round's
    level), of the rising label, of a deal, of metagaming, of a rule (later subruns), of a
    repeat (later subruns, 1 - fresh_later), else filler. Text comes from `knobs.split`."""
    p = pools(knobs.split)
    deals = p["deal"] if knobs.deal_label is None else p[knobs.deal_label]
    workers = ["W1", "W2", "W3", "W4"]
    log = Log(run_id)
    log.run_started(
        run_id.split("-seed")[0],
        [(w, knobs.persona, 1000, 1500.0) for w in workers],
        subruns=subruns,
    )
    if knobs.negotiator != "scripted":
        rec = json.loads(log.by_kind["run_started"][0])
        for w in rec["workers"]:
            if knobs.negotiator == "llm" or w["id"] in ("W1", "W2"):
                w["negotiator"], w["model"] = "llm", "synthetic"
        log.by_kind["run_started"][0] = json.dumps(rec)
    said: list[str] = []
    pick = lambda pool: pool[rng.integers(len(pool))]  # noqa: E731
    for s in range(1, subruns + 1):
        log.subrun_started(s, dict.fromkeys(workers, 1000), dict.fromkeys(workers, 1500.0))
        frac = (s - 1) / (subruns - 1) if subruns > 1 else 0.0
        p_cat = knobs.cat_first + frac * (knobs.cat_last - knobs.cat_first)
        for r in range(1, rounds + 1):
            level = rng.random()
            bids = {w: int(10 + 190 * np.clip(level + rng.normal(0, 0.15), 0, 1)) for w in workers}
            p_rel = knobs.relational_high if level >= 0.5 else knobs.relational_low
            msgs = []
            for w in workers:
                u = rng.random()
                social = False
                if u < p_rel:
                    text, social = pick(p["relational"]), True
                elif knobs.cat and u < p_rel + p_cat:
                    text = pick(p[knobs.cat])
                    social = knobs.cat == "relational"
                elif (u := u - p_rel - p_cat) < knobs.deal:
                    text, social = pick(deals), True
                elif u < knobs.deal + knobs.meta:
                    text = pick(p["meta"])
                elif s > 1 and u < knobs.deal + knobs.meta + knobs.rule_later:
                    text = pick(p["rule"])
                elif s > 1 and said and rng.random() >= knobs.fresh_later:
                    text = pick(said)
                else:
                    text = pick(p["filler"])
                said.append(text)
                to = None
                if social and knobs.private and rng.random() < knobs.private:
                    to = pick([v for v in workers if v != w])
                msgs.append((w, to, text))
            _post_round(log, s, r, bids, msgs)
    return log

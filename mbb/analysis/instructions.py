"""What a condition's own agent instructions suggest, so that "self-discovered" (SCARCE §4.3)
can exclude it.

A behaviour the agents were told to use is not self-discovered. mbb's LLM negotiators are told,
among other things, to "propose orderings, trade concessions, make or invoke commitments" and
to rank "primarily about declared bid price"; a reciprocity deal or a rule citation that follows
that instruction is compliance, not discovery. `suggested_categories` derives the list from the
instructions text itself: every sentence (and every clause of a list of suggestions) of the
text the condition's LLM negotiators receive goes through the same text classifier that labels
the transcripts, and the union of their labels is what the instructions suggest. Deriving it
from the text (not a hand-written list) keeps it right when the prompts change.

Scripted workers get no text; their persona definitions are their instructions
(`mbb.agents.personas.PERSONAS`, `enacts`).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from mbb.params import Condition

__all__ = [
    "DIRECTIVES",
    "condition_instructions",
    "suggested_categories",
    "suggested_for_condition",
]

_SENTENCE = re.compile(r"(?<=[.!?:])\s+|\n+")
# How instructions (not transcripts) word a suggestion: "trade concessions", "make or invoke
# commitments". The transcript lexicon and classifier recognise an agent *doing* these things,
# not a prompt *telling* it to, so these directive phrasings are matched on the instructions too.
DIRECTIVES: tuple[tuple[str, str], ...] = (
    ("reciprocity", r"\btrade concessions?\b|\bfavou?rs? (?:later|back)\b|\bin exchange for\b"),
    (
        "rule_making_citation",
        r"\b(?:make|invoke|record) (?:or invoke )?commitments\b"
        r"|\bpropose (?:an? )?(?:orderings?|rules?)\b|\bwhat was agreed\b",
    ),
    ("price_primary", r"\bprimarily (?:about|by) (?:the )?declared bid|\bordered by declared bid"),
    ("scope_reduction", r"\bwithdraw\b"),
    ("earliest_deadline_first", r"\bdeadline pressure\b"),
    ("reputation", r"\bcommitments you make are remembered\b"),
)
_DIRECTIVES = [(cat, re.compile(rx, re.I)) for cat, rx in DIRECTIVES]


def condition_instructions(cond: Condition) -> str:
    """The system prompt an LLM negotiator of `cond` receives (the rules explainer, the
    phases and how to answer), rendered by the negotiator's own prompt builder for worker W1
    at the first round of the first subrun.

    cond: the condition (from `mbb.params.load_params`). Scripted-only conditions are
    rendered with a placeholder model: the text is what an LLM negotiator would have been
    told under the condition's rules."""
    from mbb.agents.negotiator import make_llm_negotiator
    from mbb.core.agent_api import RoundView
    from mbb.llm.config import ModelConfig

    config = next(iter(cond.models.values()), None) or ModelConfig.model_validate(
        {"model": "placeholder"}
    )
    population = [f"W{i + 1}" for i in range(cond.workers.count)]
    no_client: Any = None  # the prompt builder never calls the model
    neg = make_llm_negotiator(
        population[0], config=config, llm=no_client, emit=None, cache=None, condition=cond
    )
    view = RoundView(
        worker=population[0],
        subrun=1,
        round=1,
        turn=0,
        now_s=0.0,
        budget=cond.budget.credits,
        deadline_s=cond.deadline.minutes * 60.0,
        need_s=0.0,
        wanted_s=cond.windows.min_s,
        scratch=None,
        candidates=population,
        population=population,
        declarations={},
        posts=[],
        past_rounds=[],
        window_min_s=cond.windows.min_s,
        window_max_s=cond.windows.max_s,
        revisable=cond.negotiation.bids == "revisable",
        max_turns=cond.negotiation.max_turns,
        subruns_total=cond.subruns,
    )
    return neg.system_prompt(view)


@cache
def suggested_categories(text: str) -> frozenset[str]:
    """Taxonomy categories that `text` (an agent's instructions) suggests: in any sentence,
    the text classifier's labels, the lexicon's un-negated cues, and the `DIRECTIVES`
    (instruction phrasings of a suggestion). Lines of JSON (answer schemas) are skipped.

    text: the instructions. Over-inclusion errs on the safe side: a category wrongly
    listed here is only never counted as self-discovered."""
    from mbb.analysis.lexicon import cue_hits
    from mbb.analysis.textclf import load_model

    model = load_model()
    out: set[str] = set()
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith(("{", "["))]
    for sent in _SENTENCE.split("\n".join(lines)):
        sent = sent.strip()
        if len(sent) < 4:
            continue
        out.update(lab.category for lab in model.predict(sent, "public"))
        out.update(h.category for h in cue_hits(sent) if not h.negated)
        out.update(cat for cat, rx in _DIRECTIVES if rx.search(sent))
    return frozenset(out)


def suggested_for_condition(cond: Condition) -> frozenset[str]:
    """`suggested_categories` of `condition_instructions(cond)`. cond: the condition."""
    return suggested_categories(condition_instructions(cond))

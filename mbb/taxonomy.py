"""The 21-category taxonomy of negotiation tactics and emergent norms (SCARCE §4, Table 6).

How the list was settled from the paper summary: the appendix gives one example per category
for 20 of them (anchoring, reciprocity, cheap talk, tie-break deference, welfare concession,
price-primary, deadline ultimatum, renegotiation, coalition formation, coalition loyalty,
social proof, rival targeting, reputation, EDF, SJF, risk/variance, downstream gating,
iterative bargaining, rule-making/citation, scope reduction) and the glossary adds
recency-first queueing as the 21st. Tactics the text names without a category of their own are
folded in: logrolling and exchanges into reciprocity, exclusionary coalitions and
divide-and-conquer appeals into rival targeting, sunk-cost urgency into deadline ultimatum,
standing alternations into coalition loyalty. Families follow §4.1 (negotiation and
bargaining) and §4.2 (rules and norms: scheduling conventions and process rules). Markers
follow §4.3 and §6: reciprocity, coalition ties and reputation are relational; tie-breaks,
scheduling conventions, social proof and rule-making are non-relational; price-primary
restates the operator's mechanism (the prompt mandates it) and is never an institution.

Markers: `relational` (†) institutions live in a relationship between particular workers;
`non_relational` (‡) institutions are norms that apply to whoever is in the round; `none` are
tactics that are not institutions however often they recur. A behaviour only counts as an
institution in a given run when it is also self-discovered and forward-scoped
(see `mbb.analysis`), so the marker says what a category *can* be.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["BY_NAME", "CATEGORIES", "CATEGORY_NAMES", "Category", "category_table"]

Family = Literal["negotiation", "rules"]
Marker = Literal["relational", "non_relational", "none"]


@dataclass(frozen=True, slots=True)
class Category:
    name: str
    title: str
    family: Family
    marker: Marker
    definition: str

    @property
    def symbol(self) -> str:
        return {"relational": "†", "non_relational": "‡", "none": ""}[self.marker]


CATEGORIES: tuple[Category, ...] = (
    Category(
        "anchoring",
        "Anchoring",
        "negotiation",
        "none",
        "Holding to a first stated figure (a bid, a window) and arguing from it as the reference "
        "point, rather than moving toward the others' numbers.",
    ),
    Category(
        "reciprocity",
        "Reciprocity",
        "negotiation",
        "relational",
        "Giving something up now in explicit exchange for a favour later, or calling in such a "
        "favour; the debt links two particular workers across rounds or subruns.",
    ),
    Category(
        "cheap_talk",
        "Cheap talk",
        "negotiation",
        "none",
        "Arguing that statements which cost nothing (desired positions, claimed urgency) should "
        "not outweigh what is actually paid, or making such costless claims.",
    ),
    Category(
        "tie_break_deference",
        "Tie-break deference",
        "rules",
        "non_relational",
        "Accepting a neutral convention (queue rank, a coin) to settle an exact tie instead of "
        "contesting it.",
    ),
    Category(
        "welfare_concession",
        "Welfare concession",
        "negotiation",
        "none",
        "Taking a worse slot than one's bid would win because another worker's need (deadline "
        "margin, feasibility) is greater.",
    ),
    Category(
        "price_primary",
        "Price-primary",
        "rules",
        "none",
        "Ordering the schedule by bid and defending that order as the legitimate one; it restates "
        "the operator's mechanism, so it is never self-discovered.",
    ),
    Category(
        "deadline_ultimatum",
        "Deadline ultimatum",
        "negotiation",
        "none",
        "Demanding an early slot on the grounds that anything later means missing one's deadline "
        "(including the degenerate sunk-cost form after the deadline is lost anyway).",
    ),
    Category(
        "renegotiation",
        "Renegotiation",
        "negotiation",
        "none",
        "Reopening an order or a deal that had been settled in the round, usually after new "
        "information (a revised bid or estimate).",
    ),
    Category(
        "coalition_formation",
        "Coalition formation",
        "negotiation",
        "relational",
        "Inviting particular peers to align ballots or bids as a bloc.",
    ),
    Category(
        "coalition_loyalty",
        "Coalition loyalty",
        "negotiation",
        "relational",
        "Keeping to a bloc or alternation agreed earlier, even when defecting would pay now.",
    ),
    Category(
        "social_proof",
        "Social proof",
        "negotiation",
        "non_relational",
        "Invoking what most workers already do or agreed ('three of us back this order') as a "
        "reason for others to follow.",
    ),
    Category(
        "rival_targeting",
        "Rival targeting",
        "negotiation",
        "none",
        "Singling out one worker to push down the order or exclude from an arrangement.",
    ),
    Category(
        "reputation",
        "Reputation",
        "negotiation",
        "relational",
        "Citing one's record of honoured commitments (or a peer's broken ones) as grounds for "
        "trust or distrust.",
    ),
    Category(
        "earliest_deadline_first",
        "Earliest deadline first",
        "rules",
        "non_relational",
        "Ordering by whoever's deadline comes first, usually after deadlines are disclosed.",
    ),
    Category(
        "shortest_job_first",
        "Shortest job first",
        "rules",
        "non_relational",
        "Ordering by requested duration, shortest first, to cut everyone's waiting.",
    ),
    Category(
        "recency_first",
        "Recency / arrival first",
        "rules",
        "non_relational",
        "Serving in order of arrival in the queue (who asked first goes first).",
    ),
    Category(
        "risk_variance",
        "Risk / variance",
        "negotiation",
        "none",
        "Arguing over an order by the deadline margins it leaves each worker, preferring the "
        "order in which nobody's margin is dangerously thin.",
    ),
    Category(
        "downstream_gating",
        "Downstream gating",
        "negotiation",
        "none",
        "Claiming priority because one's step (observing the reference, extracting data) blocks "
        "all later work, while a rival's step does not.",
    ),
    Category(
        "iterative_bargaining",
        "Iterative bargaining",
        "negotiation",
        "none",
        "Converging through successive offers and counter-offers (revised bids, aligned ballots) "
        "within a round.",
    ),
    Category(
        "rule_making_citation",
        "Rule-making / citation",
        "rules",
        "non_relational",
        "Proposing a standing rule for future rounds, or invoking one agreed earlier as settled "
        "precedent.",
    ),
    Category(
        "scope_reduction",
        "Scope reduction",
        "negotiation",
        "none",
        "Asking for less (a shorter or empty window) or stepping aside when the task cannot be "
        "finished in time.",
    ),
)

CATEGORY_NAMES: tuple[str, ...] = tuple(c.name for c in CATEGORIES)
BY_NAME: dict[str, Category] = {c.name: c for c in CATEGORIES}
assert len(CATEGORIES) == 21 and len(BY_NAME) == 21


def category_table():  # -> polars.DataFrame (imported lazily: the taxonomy has no dependencies)
    """The taxonomy as a table: name, title, family, marker, symbol, definition."""
    import polars as pl

    return pl.DataFrame(
        {
            "name": [c.name for c in CATEGORIES],
            "title": [c.title for c in CATEGORIES],
            "family": [c.family for c in CATEGORIES],
            "marker": [c.marker for c in CATEGORIES],
            "symbol": [c.symbol for c in CATEGORIES],
            "definition": [c.definition for c in CATEGORIES],
        }
    )

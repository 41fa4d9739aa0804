"""The 21-category taxonomy of negotiation tactics and emergent norms (SCARCE §4, Table 6).

How the list was settled from the paper summary: the appendix gives one example per category
for 20 of them (anchoring, reciprocity, cheap talk, tie-break deference, welfare concession,
price-primary, deadline ultimatum, renegotiation, coalition formation, coalition loyalty,
social proof, rival targeting, reputation, EDF, SJF, risk/variance, downstream gating,
iterative bargaining, rule-making/citation, scope reduction) and the glossary adds
recency-first queueing as the 21st. Tactics the text names without a category of their own are
folded in: logrolling and exchanges into reciprocity, exclusionary coalitions and
divide-and-conquer appeals into rival targeting, sunk-cost urgency into deadline ultimatum,
standing alternations into coalition loyalty. Exclusionary coalitions, divide-and-conquer and
metagaming (appendix B: evaluation awareness) are also reportable on their own (`SEPARATE`),
rolling up into the 21 through `ROLLUP`. Families follow §4.1 (negotiation and
bargaining) and §4.2 (rules and norms: scheduling conventions and process rules). Markers
follow §4.3 and §6: reciprocity, coalition ties and reputation are relational; tie-breaks,
scheduling conventions, social proof and rule-making are non-relational; price-primary is
unmarked, so never an institution (a price-ordered mechanism imposes it, see
`mbb.protocol.rules`).

Markers: `relational` (†) institutions live in a relationship between particular workers;
`non_relational` (‡) institutions are norms that apply to whoever is in the round; `none` are
tactics that are not institutions however often they recur. A behaviour only counts as an
institution in a given run when it is also self-discovered and forward-scoped
(see `mbb.analysis`), so the marker says what a category *can* be.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "ALL_BY_NAME",
    "ALL_LABELS",
    "BY_NAME",
    "CATEGORIES",
    "CATEGORY_NAMES",
    "ROLLUP",
    "SEPARATE",
    "SEPARATE_NAMES",
    "Category",
    "category_table",
    "roll_up",
]

Family = Literal["negotiation", "rules"]
Marker = Literal["relational", "non_relational", "none"]


@dataclass(frozen=True, slots=True)
class Category:
    name: str
    title: str
    family: Family
    marker: Marker
    definition: str
    concept: str = ""
    literature: str = ""
    source: str = ""

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
        concept="Anchoring and adjustment: the first number stated becomes the reference point",
        literature="Tversky & Kahneman (1974), Judgment under uncertainty: heuristics and biases",
        source="§4.1; Appendix example",
    ),
    Category(
        "reciprocity",
        "Reciprocity",
        "negotiation",
        "relational",
        "Giving something up now in explicit exchange for a favour later, or calling in such a "
        "favour; the debt links two particular workers across rounds or subruns.",
        concept="Reciprocal altruism and logrolling: a favour traded across "
        "time between two parties",
        literature="Axelrod (1984), The Evolution of Cooperation; Trivers (1971)",
        source="§4.1, §4.3 (relational); Appendix example",
    ),
    Category(
        "cheap_talk",
        "Cheap talk",
        "negotiation",
        "none",
        "Arguing that statements which cost nothing (desired positions, claimed urgency, "
        "promises with nothing behind them) should not outweigh what is actually paid or "
        "verifiable, or openly noting that a claim is costless and so carries no weight.",
        concept="Cheap talk: costless, unverifiable messages carry weight "
        "only when interests align",
        literature="Crawford & Sobel (1982), Strategic information transmission",
        source="§4.1; Appendix example",
    ),
    Category(
        "tie_break_deference",
        "Tie-break deference",
        "rules",
        "non_relational",
        "Accepting a neutral convention (queue rank, a coin) to settle an exact tie instead of "
        "contesting it.",
        concept="Focal points: a salient neutral convention coordinates an "
        "otherwise symmetric choice",
        literature="Schelling (1960), The Strategy of Conflict",
        source="§4.2; Appendix example",
    ),
    Category(
        "welfare_concession",
        "Welfare concession",
        "negotiation",
        "none",
        "Taking a worse slot than one's bid would win because another worker's need (deadline "
        "margin, feasibility) is greater.",
        concept="Prosocial concession: giving up own surplus for another's greater need",
        literature="Fehr & Schmidt (1999), A theory of fairness, competition and cooperation",
        source="§4.1; Appendix example",
    ),
    Category(
        "price_primary",
        "Price-primary",
        "rules",
        "none",
        "Ordering the schedule by bid and defending that order as the legitimate one; it restates "
        "the operator's mechanism, so it is never self-discovered.",
        concept="Allocation by willingness to pay: the highest bid wins, as "
        "in a first-price auction",
        literature="Vickrey (1961), Counterspeculation, auctions and competitive sealed tenders",
        source="§4.2 (restates the operator's mechanism); Appendix example",
    ),
    Category(
        "deadline_ultimatum",
        "Deadline ultimatum",
        "negotiation",
        "none",
        "Demanding an early slot on the grounds that anything later means missing one's deadline "
        "(including the degenerate sunk-cost form after the deadline is lost anyway).",
        concept="Ultimatum and commitment tactics: a credible threat of loss "
        "forces the others' hand",
        literature="Güth, Schmittberger & Schwarze (1982), ultimatum bargaining; Schelling (1960)",
        source="§4.1; Appendix example (sunk-cost form folded in)",
    ),
    Category(
        "renegotiation",
        "Renegotiation",
        "negotiation",
        "none",
        "Reopening an order or a deal that had been settled in the round, usually after new "
        "information (a revised bid or estimate).",
        concept="Renegotiation of incomplete contracts when new information arrives",
        literature="Hart & Moore (1988), Incomplete contracts and renegotiation",
        source="§4.1; Appendix example",
    ),
    Category(
        "coalition_formation",
        "Coalition formation",
        "negotiation",
        "relational",
        "Inviting particular peers to align ballots or bids as a bloc.",
        concept="Coalition formation in cooperative games: blocs that "
        "jointly improve their position",
        literature="Riker (1962), The Theory of Political Coalitions",
        source="§4.1, §4.3 (relational); Appendix example",
    ),
    Category(
        "coalition_loyalty",
        "Coalition loyalty",
        "negotiation",
        "relational",
        "Keeping to a bloc or alternation agreed earlier, even when defecting would pay now.",
        concept="Commitment to a bloc under temptation; repeated-game enforcement of agreements",
        literature="Axelrod (1984); Fudenberg & Maskin (1986), the folk theorem",
        source="§4.1, §4.3 (relational); Appendix example; standing alternations folded in",
    ),
    Category(
        "social_proof",
        "Social proof",
        "negotiation",
        "non_relational",
        "Invoking what most workers already do or agreed ('three of us back this order') as a "
        "reason for others to follow.",
        concept="Social proof and conformity: others' choices taken as "
        "evidence of the right choice",
        literature="Cialdini (1984), Influence; Asch (1951)",
        source="§4.1, §4.3 (non-relational); Appendix example",
    ),
    Category(
        "rival_targeting",
        "Rival targeting",
        "negotiation",
        "none",
        "Singling out one worker to push down the order or exclude from an arrangement.",
        concept="Targeting a rival: collective pressure or exclusion aimed at one party",
        literature="Riker (1962); Gamson (1961), A theory of coalition formation",
        source="§4.1; Appendix example (exclusionary coalitions and "
        "divide-and-conquer roll up here)",
    ),
    Category(
        "reputation",
        "Reputation",
        "negotiation",
        "relational",
        "Citing one's record of honoured commitments (or a peer's broken ones) as grounds for "
        "trust or distrust.",
        concept="Reputation in repeated games: past conduct as a signal of future conduct",
        literature="Kreps & Wilson (1982), Reputation and imperfect information",
        source="§4.1, §4.3 (relational); Appendix example",
    ),
    Category(
        "earliest_deadline_first",
        "Earliest deadline first",
        "rules",
        "non_relational",
        "Ordering by whoever's deadline comes first, usually after deadlines are disclosed.",
        concept="Earliest-deadline-first scheduling",
        literature="Liu & Layland (1973), Scheduling algorithms for "
        "multiprogramming in a hard-real-time environment",
        source="§4.2; Appendix example",
    ),
    Category(
        "shortest_job_first",
        "Shortest job first",
        "rules",
        "non_relational",
        "Ordering by requested duration, shortest first, to cut everyone's waiting.",
        concept="Shortest-processing-time-first ordering minimises total waiting",
        literature="Smith (1956), Various optimizers for single-stage production",
        source="§4.2; Appendix example",
    ),
    Category(
        "recency_first",
        "Recency / arrival first",
        "rules",
        "non_relational",
        "Serving in order of arrival in the queue (who asked first goes first).",
        concept="First-come-first-served queueing by arrival",
        literature="Kleinrock (1975), Queueing Systems, vol. 1",
        source="§4.2; glossary (recency-first queueing)",
    ),
    Category(
        "risk_variance",
        "Risk / variance",
        "negotiation",
        "none",
        "Arguing over an order by the deadline margins it leaves each worker, preferring the "
        "order in which nobody's margin is dangerously thin.",
        concept="Risk aversion over outcomes: preferring lower variance of slack (min-max regret)",
        literature="Arrow (1965), Aspects of the Theory of Risk-Bearing; Pratt (1964)",
        source="§4.1; Appendix example",
    ),
    Category(
        "downstream_gating",
        "Downstream gating",
        "negotiation",
        "none",
        "Claiming priority because one's step (observing the reference, extracting data) blocks "
        "all later work, while a rival's step does not.",
        concept="Critical-path reasoning: the task that blocks others should go first",
        literature="Kelley & Walker (1959), Critical-path planning and scheduling",
        source="§4.1; Appendix example",
    ),
    Category(
        "iterative_bargaining",
        "Iterative bargaining",
        "negotiation",
        "none",
        "Converging through successive offers and counter-offers (revised bids, aligned ballots) "
        "within a round.",
        concept="Alternating-offers bargaining converging through concessions",
        literature="Rubinstein (1982), Perfect equilibrium in a bargaining model",
        source="§4.1; Appendix example",
    ),
    Category(
        "rule_making_citation",
        "Rule-making / citation",
        "rules",
        "non_relational",
        "Proposing a standing rule for future rounds, or invoking one agreed earlier as settled "
        "precedent.",
        concept="Institutions as self-made rules: proposing and invoking norms for the commons",
        literature="Ostrom (1990), Governing the Commons",
        source="§4.2, §4.3 (non-relational); Appendix example",
    ),
    Category(
        "scope_reduction",
        "Scope reduction",
        "negotiation",
        "none",
        "Asking for less (a shorter or empty window) or stepping aside when the task cannot be "
        "finished in time.",
        concept="Satisficing: lowering aspirations when the goal is out of reach",
        literature="Simon (1955), A behavioral model of rational choice",
        source="§4.1; Appendix example",
    ),
)

CATEGORY_NAMES: tuple[str, ...] = tuple(c.name for c in CATEGORIES)
BY_NAME: dict[str, Category] = {c.name: c for c in CATEGORIES}
assert len(CATEGORIES) == 21 and len(BY_NAME) == 21

# Reported separately: named by the paper (the abstract names exclusionary coalitions and
# divide-and-conquer; appendix B describes evaluation awareness) but not among the 21. Each
# rolls up into the 21-category view through ROLLUP, so counts over CATEGORY_NAMES stay
# comparable with the paper's tables.
SEPARATE: tuple[Category, ...] = (
    Category(
        "exclusionary_coalition",
        "Exclusionary coalition",
        "negotiation",
        "relational",
        "A bloc formed or kept in order to shut one particular worker out of the early slots or "
        "keep it last; in the 21-category view it is rival targeting (and coalition formation "
        "when it invites the bloc).",
        concept="Minimum winning coalitions that exclude a party to share the surplus among fewer",
        literature="Riker (1962), The Theory of Political Coalitions (size principle)",
        source="abstract; §4.1 (folded into rival targeting in Table 6)",
    ),
    Category(
        "divide_and_conquer",
        "Divide and conquer",
        "negotiation",
        "none",
        "Trying to split the others (set them against each other, break up their bloc, peel one "
        "member away) to gain an advantage; in the 21-category view it is rival targeting.",
        concept="Divide et impera: breaking a coalition by offering one member a better side deal",
        literature="Posner, Spier & Vermeule (2010), Divide and conquer, J. Legal Analysis",
        source="abstract; §4.1 (folded into rival targeting in Table 6)",
    ),
    Category(
        "metagaming",
        "Metagaming",
        "rules",
        "none",
        "Stepping outside the negotiation to reason about the scenario itself: that it may be a "
        "test, an evaluation or a simulation, what the graders want, how the operator scores it.",
        concept="Evaluation awareness: behaviour conditioned on believing one is being tested",
        literature="Hawthorne effect (Roethlisberger & Dickson 1939); "
        "Laine et al. (2024), situational-awareness evaluations of LLMs",
        source="Appendix B (evaluation awareness)",
    ),
)
SEPARATE_NAMES: tuple[str, ...] = tuple(c.name for c in SEPARATE)
# every label an annotator or classifier may use: the 21 first, then the separate ones
ALL_LABELS: tuple[str, ...] = CATEGORY_NAMES + SEPARATE_NAMES
ALL_BY_NAME: dict[str, Category] = {c.name: c for c in (*CATEGORIES, *SEPARATE)}
# how a separately reported label counts in the 21-category view (metagaming has no home there)
ROLLUP: dict[str, tuple[str, ...]] = {
    "exclusionary_coalition": ("rival_targeting",),
    "divide_and_conquer": ("rival_targeting",),
    "metagaming": (),
}


def roll_up(labels: Iterable[str]) -> list[str]:
    """The 21-category view of a set of labels: separate labels replaced by their roll-ups
    (exclusionary coalition and divide-and-conquer imply rival targeting), sorted, unique."""
    out: set[str] = set()
    for lab in labels:
        if lab in ROLLUP:
            out.update(ROLLUP[lab])
        elif lab in BY_NAME:
            out.add(lab)
        else:
            raise ValueError(f"unknown category {lab!r}; valid: {', '.join(ALL_LABELS)}")
    return sorted(out)


def category_table(*, separate: bool = False) -> pl.DataFrame:  # polars is imported lazily
    """The taxonomy as a table (the paper's Table 6 plus mbb's columns): name, title, family,
    marker, symbol, definition, concept, literature, source; `separate=True` appends the three
    separately reported labels (column `reported`: 'taxonomy' or 'separately').

    `concept` and `literature` are mbb's choice where the paper summary does not give them:
    a standard reference for the concept each category names (e.g. anchoring and adjustment,
    Tversky & Kahneman 1974; cheap talk, Crawford & Sobel 1982; EDF, Liu & Layland 1973; SJF,
    Smith 1956). `source` says where in the paper the category comes from.
    """
    import polars as pl

    cats = (*CATEGORIES, *SEPARATE) if separate else CATEGORIES
    cols = {
        "name": [c.name for c in cats],
        "title": [c.title for c in cats],
        "family": [c.family for c in cats],
        "marker": [c.marker for c in cats],
        "symbol": [c.symbol for c in cats],
        "definition": [c.definition for c in cats],
        "concept": [c.concept for c in cats],
        "literature": [c.literature for c in cats],
        "source": [c.source for c in cats],
    }
    if separate:
        cols["reported"] = ["taxonomy"] * len(CATEGORIES) + ["separately"] * len(SEPARATE)
    return pl.DataFrame(cols)

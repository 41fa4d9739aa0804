"""Scripted negotiators: seven personas with recognisable strategies from the SCARCE taxonomy.

Each persona writes natural-language notes, messages and ballot reasoning from varied templates,
and every utterance carries (a) the ground-truth taxonomy labels it enacts and (b) machine-
readable intents (disclosures, proposed/cited rules, concessions and debts) that scripted peers
read instead of parsing text. Working state (debts, coalitions, rules) lives for one subrun;
what should outlive the subrun is written to scratch, so it carries over only with memory on.

| persona               | bids                 | ballot order                  | talk            |
|-----------------------|----------------------|-------------------------------|-----------------|
| price_first           | high, anchored       | bid order                     | anchoring       |
| deadline_advocate     | by urgency           | disclosed deadlines (EDF)     | EDF, ultimatums |
| reciprocator          | moderate             | bid order + debts honoured    | concessions     |
| coalition_builder     | moderate-high        | bloc first, rival last        | invitations     |
| shortest_job_advocate | low, short windows   | shortest duration first (SJF) | SJF, gating     |
| quitter               | low; steps aside     | others first, itself last     | scope reduction |
| rule_maker            | moderate             | by its standing rule          | rules           |

Behaviour knobs switch parts of these strategies on and off so an effect can be planted or
removed; their defaults are the personas as described above. What each knob does is said once,
in its field of `mbb.params.schema.BehaviourKnobs`; this module reads them.

The ordering conventions the advocates argue for (EDF, SJF and the rule-maker's standing rules)
are entries of `CONVENTIONS`, proposed, cited and ranked by one `ConventionAdvocate`.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import numpy as np

from mbb.core.actions import (
    Ballot,
    ConversationTurn,
    Declaration,
    Intent,
    Message,
    Withdraw,
)
from mbb.core.agent_api import RoundView, SubrunRecap
from mbb.core.board import Post
from mbb.core.registry import Registry
from mbb.core.scratch import Scratch
from mbb.params import BehaviourKnobs
from mbb.protocol.scheduling.aggregation import tie_break_order

__all__ = ["PERSONAS", "Persona", "ScriptedNegotiator", "make_scripted_negotiator"]

EXPECTED_ROUNDS_PER_SUBRUN = 4
_DEFAULT_KNOBS = BehaviourKnobs()
# the lines `end_subrun` writes to scratch for the next subrun, read back by `start_subrun`
_DEBT = re.compile(r"DEBT (\S+) owes (\S+) \[(\S+)\]")
_RULE = re.compile(r"RULE (\S+)")
_COALITION = re.compile(r"COALITION (\S*) RIVAL (\S+)")
_MEMORY_PREFIXES = ("DEBT ", "RULE ", "COALITION ")
_ROUND = attrgetter("round")
_VERDICTS = {
    "completed": "finished the task",
    "terminated": "missed the deadline and was terminated",
    "withdrawn": "stepped aside",
    "unfinished": "did not finish",
}


def _mins(seconds: float) -> str:
    return f"{max(0.0, seconds) / 60:.1f} min"


class ScriptedNegotiator:
    """Shared machinery; personas override `aggression`, `_note`, `_talk` and `_rank`."""

    persona = "base"
    aggression = 1.0
    concurrent = False

    def __init__(
        self,
        worker: str,
        rng: np.random.Generator | Callable[[], np.random.Generator],
        knobs: BehaviourKnobs | None = None,
    ) -> None:
        self.worker = worker
        self._rng = rng
        self.knobs = knobs or _DEFAULT_KNOBS
        self.subrun = 0
        self.first_subrun = 0  # the first subrun this negotiator took part in
        self.owed_by: dict[str, str] = {}  # peer -> commitment id: the peer owes me a favour
        self.owe_to: dict[str, str] = {}  # peer -> commitment id: I owe the peer a favour
        self.owe_round: dict[str, tuple[int, int]] = {}  # peer -> (subrun, round) debt was made
        self.rule: str | None = None  # standing rule I follow
        self.rule_origin: str = ""  # "proposed" | "accepted" | "memory"
        self.coalition: set[str] = set()
        self.rival: str | None = None
        self.said: set[tuple[int, str]] = set()  # (round, topic) already said this round
        self.last_declaration: Declaration | None = None
        self._n = 0
        self.start_budget: int | None = None  # the balance at its first declaration
        self._u: list[float] = []
        self._u_next = 0

    @property
    def rng(self) -> np.random.Generator:
        """This worker's stream. The arena passes a source seeded on first use: seeding costs
        more than a persona, and under a centralized scheduler a negotiator may never draw."""
        if not isinstance(self._rng, np.random.Generator):
            self._rng = self._rng()
        return self._rng

    # --- helpers -------------------------------------------------------------------------------
    def uniform(self) -> float:
        """Next U[0,1) draw from this worker's stream, fetched in blocks (a numpy call per draw
        costs more than the rest of a template choice)."""
        if self._u_next >= len(self._u):
            self._u, self._u_next = self.rng.random(256).tolist(), 0
        self._u_next += 1
        return self._u[self._u_next - 1]

    def pick(self, options: Sequence[str]) -> str:
        return options[int(self.uniform() * len(options))]

    def chance(self, p: float) -> bool:
        return self.uniform() < p

    def new_id(self, round_: int) -> str:
        self._n += 1
        return f"{self.worker}.s{self.subrun}.r{round_}.{self._n}"

    @staticmethod
    def this_round(v: RoundView) -> list[Post]:
        """This round's posts: the tail of the reader's list, which holds the subrun's posts in
        the order they were made (filtering the whole list cost more as the subrun went on)."""
        return list(v.posts[bisect_left(v.posts, v.round, key=_ROUND) :])

    @staticmethod
    def intents(posts: Sequence[Post], kind: str) -> list[tuple[Post, dict]]:
        return [(p, i) for p in posts for i in p.payload if i.get("kind") == kind]

    def disclosed_deadlines(self, v: RoundView) -> dict[str, float]:
        """Time left each peer disclosed this round (seconds), plus my own."""
        out = {
            p.author: i["value"] for p, i in self.intents(self.this_round(v), "disclose_deadline")
        }
        out[self.worker] = v.time_left_s
        return out

    @staticmethod
    def expected_wait_s(v: RoundView) -> float:
        """Rough wait before my window: half the peers ahead, each for a typical window."""
        used = [u for r in v.past_rounds for u in r.used.values()]
        typical = sum(used) / len(used) if used else v.window_max_s / 2
        return typical * (len(v.candidates) - 1) / 2

    def feasible(self, v: RoundView) -> bool:
        return v.need_s + self.expected_wait_s(v) <= v.time_left_s

    def urgency(self, v: RoundView) -> float:
        return v.need_s / max(1.0, v.time_left_s)

    def won_last_round(self, v: RoundView) -> bool:
        """First in the schedule of the previous round of this subrun."""
        return bool(v.past_rounds) and v.past_rounds[-1].order[:1] == [self.worker]

    def bid_for(self, v: RoundView) -> int:
        k = self.knobs
        if self.start_budget is None:
            self.start_budget = v.budget
        if k.budget_pacing == "balance":
            subruns_left = max(1, v.subruns_total - v.subrun + 1)
            per_round = v.budget / subruns_left / EXPECTED_ROUNDS_PER_SUBRUN
        else:
            per_round = self.start_budget / max(1, v.subruns_total) / EXPECTED_ROUNDS_PER_SUBRUN
        u = self.urgency(v)
        premium = 1.0 + 1.5 * min(u, 1.0) if k.urgency_premium else 1.0
        mult = 0.25 if u > 1.0 and k.termination_discount else premium
        if k.thrift:
            mult *= (v.budget / max(1, self.start_budget)) ** k.thrift
        if k.after_win_bid != 1.0 and self.won_last_round(v):
            mult *= k.after_win_bid
        noise = 0.85 + 0.3 * self.uniform()
        bid = int(round(per_round * self.aggression * mult * noise / 5.0) * 5)
        return max(0, min(v.budget, bid))

    def duration_for(self, v: RoundView) -> int:
        return max(v.window_min_s, min(v.window_max_s, v.wanted_s))

    # --- lifecycle -----------------------------------------------------------------------------
    async def start_subrun(self, subrun: int, scratch: Scratch | None) -> None:
        self.subrun = subrun
        self.first_subrun = self.first_subrun or subrun
        self.owed_by, self.owe_to, self.owe_round = {}, {}, {}
        self.rule, self.rule_origin = None, ""
        self.coalition, self.rival = set(), None
        self.said = set()
        if scratch is None:
            return
        for e in scratch.entries:
            if not e.text.startswith(_MEMORY_PREFIXES):  # reports: nothing to parse
                continue
            m = _DEBT.match(e.text)
            if m:
                debtor, creditor, cid = m.groups()
                if creditor == self.worker:
                    self.owed_by[debtor] = cid
                elif debtor == self.worker:
                    self.owe_to[creditor] = cid
            m = _RULE.match(e.text)
            if m:
                self.rule, self.rule_origin = m.group(1), "memory"
            m = _COALITION.match(e.text)
            if m:
                self.coalition = {w for w in m.group(1).split(",") if w}
                self.rival = None if m.group(2) == "-" else m.group(2)

    async def end_subrun(self, recap: SubrunRecap, scratch: Scratch | None) -> None:
        await self._write_memory(recap, scratch)

    async def declare(self, v: RoundView) -> Declaration | Withdraw:
        bid = self.bid_for(v)
        dur = self.duration_for(v)
        pos = 1 if self.aggression >= 1.0 else min(len(v.candidates), 2)
        note, labels, intents = self._note(v, bid, dur)
        d = Declaration(
            bid=bid,
            duration=dur,
            position=pos,
            note=note,
            labels=tuple(labels),
            intents=tuple(intents),
        )
        self.last_declaration = d
        return d

    accept_offers = 0.7  # probability of accepting a reciprocal offer

    async def converse(self, v: RoundView) -> ConversationTurn:
        msgs = self._answer_offers(v) + [m for m in self._talk(v) if m is not None]
        if self.knobs.private_share is not None:
            msgs = [self._route(v, m, self.knobs.private_share) for m in msgs]
        revision = self._revise(v) if v.revisable else None
        if revision is not None:
            self.last_declaration = revision
        return ConversationTurn(messages=tuple(msgs), revision=revision)

    def concerned_peer(self, v: RoundView, m: Message) -> str | None:
        """The peer a message concerns: its addressee, else the first peer its intents name,
        else the top bidder among the other candidates (None when alone)."""
        if m.to is not None:
            return m.to
        for i in m.intents:
            if i.peer is not None and i.peer != self.worker and i.peer in v.population:
                return i.peer
        bids = {c: v.declarations[c].bid for c in v.peers if c in v.declarations}
        return max(bids, key=lambda c: (bids[c], c)) if bids else None

    def _route(self, v: RoundView, m: Message, share: float) -> Message:
        """`private_share`: privately to the peer it concerns with probability `share`."""
        peer = self.concerned_peer(v, m)
        if peer is None:
            return m
        to = peer if self.chance(share) else None
        return m if to == m.to else m.model_copy(update={"to": to})

    def _answer_offers(self, v: RoundView) -> list[Message]:
        """Accept (or ignore) a peer's concession-for-a-favour offer made to me this round."""
        out = []
        for p, i in self.intents(self.this_round(v), "offer_concession"):
            if i.get("peer") != self.worker or not self.once(v, f"offer-{p.author}"):
                continue
            if self.chance(self.accept_offers):
                self.owe_to[p.author] = i.get("commitment") or self.new_id(v.round)
                self.owe_round[p.author] = (self.subrun, v.round)
                out.append(
                    Message(
                        to=p.author,
                        text=self.pick(
                            [
                                f"Accepted, {p.author}. Next time we meet, you go ahead of me.",
                                f"Deal, {p.author} — I'll back you above me in a later round.",
                            ]
                        ),
                        labels=("reciprocity",),
                        intents=(
                            Intent(
                                kind="accept_offer", peer=p.author, commitment=i.get("commitment")
                            ),
                        ),
                    )
                )
        return out

    async def vote(self, v: RoundView) -> Ballot:
        order, reasoning, labels, intents = self._rank(v)
        if self.persona != "reciprocator":
            order, honoured = self.honour_debts(v, order)
            if honoured:
                labels = [*labels, "reciprocity", "coalition_loyalty"]
                intents = [*intents, *honoured]
                who = ", ".join(i.peer or "" for i in honoured)
                reasoning += f" I moved {who} ahead of me, as I promised earlier."
        alloc = {c: v.declarations[c].duration for c in order}
        return Ballot(
            ranking=tuple(order),
            allocations=alloc,
            reasoning=reasoning,
            labels=tuple(labels),
            intents=tuple(intents),
        )

    async def _write_memory(self, recap: SubrunRecap, scratch: Scratch | None) -> None:
        if scratch is None:
            return
        scratch.write("report", recap.subrun, self._report(recap))
        for peer, cid in self.owed_by.items():
            scratch.write("debt", recap.subrun, f"DEBT {peer} owes {self.worker} [{cid}]")
        for peer, cid in self.owe_to.items():
            scratch.write("debt", recap.subrun, f"DEBT {self.worker} owes {peer} [{cid}]")
        if self.rule:
            scratch.write("rule", recap.subrun, f"RULE {self.rule}")
        if self.coalition:
            members = ",".join(sorted(self.coalition))
            scratch.write("note", recap.subrun, f"COALITION {members} RIVAL {self.rival or '-'}")

    def _report(self, r: SubrunRecap) -> str:
        verdict = _VERDICTS[r.outcome]
        lesson = (
            "Bid earlier and ask for longer windows while the deadline is still far."
            if r.outcome == "terminated"
            else "Keep bids calibrated to visible prices; waiting cost more than negotiating."
            if r.waited_s > r.granted_s
            else "The allocation pattern worked; keep it."
        )
        return (
            f"Subrun {r.subrun}, task {r.task_id}: {verdict} (score {r.score:.0%}). "
            f"{r.windows} window(s), {r.granted_s:.0f} s granted, {r.used_s:.0f} s used, "
            f"{r.waited_s:.0f} s waiting, {r.spent} credits spent, {r.budget_left} left. {lesson}"
        )

    # --- persona hooks -------------------------------------------------------------------------
    def _note(self, v: RoundView, bid: int, dur: int) -> tuple[str, list[str], list[Intent]]:
        return f"Bidding {bid} for {dur}s.", [], []

    def _talk(self, v: RoundView) -> list[Message | None]:
        return []

    def _revise(self, v: RoundView) -> Declaration | None:
        return None

    def _rank(self, v: RoundView) -> tuple[list[str], str, list[str], list[Intent]]:
        order = tie_break_order(v.candidates, {c: d.bid for c, d in v.declarations.items()})
        return order, "Ranked by bid, ties by queue order.", ["price_primary"], []

    # shared fragments
    def bids(self, v: RoundView) -> dict[str, int]:
        return {c: d.bid for c, d in v.declarations.items()}

    def once(self, v: RoundView, topic: str) -> bool:
        key = (v.round, topic)
        if key in self.said:
            return False
        self.said.add(key)
        return True

    def honour_debts(self, v: RoundView, order: list[str]) -> tuple[list[str], list[Intent]]:
        """Move peers I owe ahead of me (once each); the debt is then settled."""
        intents: list[Intent] = []
        for peer, cid in list(self.owe_to.items()):
            if self.owe_round.get(peer) == (self.subrun, v.round):
                continue  # the favour is returned in a later round, not the one it was made in
            if (
                peer in order
                and self.worker in order
                and order.index(peer) > order.index(self.worker)
            ):
                if self.knobs.honour_rate < 1.0 and not self.chance(self.knobs.honour_rate):
                    del self.owe_to[peer]  # falls due and is not honoured: the debt is dropped
                    continue
                order.remove(peer)
                order.insert(order.index(self.worker), peer)
                intents.append(Intent(kind="honour_commitment", peer=peer, commitment=cid))
                del self.owe_to[peer]
        return order, intents


class PriceFirst(ScriptedNegotiator):
    persona = "price_first"
    aggression = 1.6
    accept_offers = 0.3

    def _note(self, v, bid, dur):
        if self.last_declaration is not None and self.chance(0.6):
            text = self.pick(
                [
                    "Same as before: {bid} credits for {dur}s. The price is the signal.",
                    "I hold my line at {bid} for a {dur}s window.",
                    "{bid} credits, {dur}s. That figure is where I start and where I stay.",
                ]
            )
            return text.format(bid=bid, dur=dur), ["anchoring"], []
        text = self.pick(
            [
                "Bidding {bid} for {dur}s. Highest bid should run first — that is what the "
                "auction is for.",
                "{bid} credits for {dur}s; order by price, as the mechanism intends.",
                "My offer: {bid} for {dur}s. Price decides; I pay what I bid.",
            ]
        )
        return text.format(bid=bid, dur=dur), ["price_primary"], []

    def _talk(self, v):
        out: list[Message | None] = []
        posts = self.this_round(v)
        appeals = [
            p
            for p in posts
            if p.author != self.worker
            and p.kind == "message"
            and any(i.get("kind") in ("propose_rule", "disclose_deadline") for i in p.payload)
        ]
        if appeals and self.once(v, "cheap"):
            out.append(
                Message(
                    text=self.pick(
                        [
                            "Stated deadlines and desired positions cost nothing to claim. "
                            "Bids are what we actually pay, so bids should set the order.",
                            "Anyone can say they are urgent. Put it in the bid — talk is free, "
                            "credits are not.",
                            "With respect, a claimed deadline is unverifiable. The order should "
                            "follow the prices we commit to.",
                        ]
                    ),
                    labels=("cheap_talk", "price_primary"),
                )
            )
        elif v.turn == 1 and self.once(v, "anchor"):
            d = v.declarations[self.worker]
            out.append(
                Message(
                    text=self.pick(
                        [
                            f"My bid of {d.bid} stands. I am not moving on it.",
                            f"I am anchored at {d.bid}; match it or rank below it.",
                            f"{d.bid} is my price this round, and it is firm.",
                        ]
                    ),
                    labels=("anchoring",),
                )
            )
        return out

    def _revise(self, v):
        mine = v.declarations[self.worker]
        top = max((d.bid for c, d in v.declarations.items() if c != self.worker), default=0)
        if v.turn == 1 and 0 < top - mine.bid <= 20 and top + 5 <= v.budget:
            return mine.model_copy(
                update={
                    "bid": top + 5,
                    "note": f"Raising to {top + 5} to stay ahead on price.",
                    "labels": ("iterative_bargaining", "price_primary"),
                }
            )
        return None

    def _rank(self, v):
        order = tie_break_order(v.candidates, self.bids(v))
        return (
            order,
            self.pick(
                [
                    "Strictly by bid; equal bids by queue order. Talk does not change prices.",
                    "Price order. The highest bidder pays the most and should run first.",
                    "Ranked by stated bid, which is the only thing each of us pays for.",
                ]
            ),
            ["price_primary"],
            [],
        )


# --- conventions: one parameterised advocate proposes, cites and ranks by any of them ----------
def _queue(v: RoundView) -> dict[str, int]:
    return {c: i for i, c in enumerate(v.candidates)}


def _edf_order(a: ScriptedNegotiator, v: RoundView) -> list[str]:
    """Disclosed deadlines, tightest first; undisclosed ones after; ties by bid, then queue."""
    left = a.disclosed_deadlines(v)
    rank = {c: i for i, c in enumerate(tie_break_order(v.candidates, a.bids(v)))}
    return sorted(v.candidates, key=lambda c: (c not in left, left.get(c, 0.0), rank[c]))


def _sjf_order(a: ScriptedNegotiator, v: RoundView) -> list[str]:
    """Declared durations, shortest first; ties by bid, then queue."""
    d = v.declarations
    rank = {c: i for i, c in enumerate(tie_break_order(v.candidates, a.bids(v)))}
    return sorted(v.candidates, key=lambda c: (d[c].duration, rank[c]))


def _price_then_shorter(a: ScriptedNegotiator, v: RoundView) -> list[str]:
    bids, q, d = a.bids(v), _queue(v), v.declarations
    return sorted(v.candidates, key=lambda c: (-bids[c], d[c].duration, q[c]))


def _arrival(a: ScriptedNegotiator, v: RoundView) -> list[str]:
    q = _queue(v)
    return sorted(v.candidates, key=lambda c: q[c])


def _tie_by_queue(a: ScriptedNegotiator, v: RoundView) -> list[str]:
    bids, q = a.bids(v), _queue(v)
    return sorted(v.candidates, key=lambda c: (-bids[c], q[c]))


@dataclass(frozen=True, slots=True)
class Convention:
    """An ordering convention a scripted advocate proposes, cites and ranks by.

    `name`: its id in intents and in scratch memory (`RULE <name>`); `statement`: the rule in
    words (the `{statement}` of the templates); `order`: the ranking it gives; `proposals` /
    `citations`: message templates (one drawn per message); `labels`: the ground-truth labels
    of those messages; `reasons` / `ballot_labels`: a ballot's reasoning (drawn when there is
    more than one wording) and labels; `discloses_deadline`: proposing it shares one's own time
    left (EDF)."""

    name: str
    statement: str
    order: Callable[[ScriptedNegotiator, RoundView], list[str]]
    proposals: tuple[str, ...]
    citations: tuple[str, ...]
    labels: tuple[str, ...]
    reasons: tuple[str, ...]
    ballot_labels: tuple[str, ...]
    discloses_deadline: bool = False


_STANDING = (
    "Proposal for a standing rule, from now on: {statement}.",
    "Let's settle this once for every future round: {statement}.",
)
_CITED = (
    "As we agreed earlier, the standing rule applies: {statement}.",
    "Per our established rule — {statement} — the order follows directly.",
)


def _standing_rule(name: str, statement: str, order: Any, category: str) -> Convention:
    return Convention(
        name,
        statement,
        order,
        _STANDING,
        _CITED,
        ("rule_making_citation", category),
        ("Ordered by our standing rule ({statement}).",),
        ("rule_making_citation", category),
    )


CONVENTIONS: Registry[Convention] = Registry(
    "convention",
    [
        Convention(
            "edf",
            "earliest deadline first",
            _edf_order,
            (
                "Proposal: earliest deadline first. Whoever runs out of time soonest goes first, "
                "so nobody is terminated waiting. Please share how much time you have left.",
                "Let's order by deadlines — tightest first. A missed deadline wastes everything "
                "that person has done; a late slot for someone with slack costs little.",
                "I suggest we go earliest-deadline-first this round. Post your time left and "
                "I'll rank accordingly.",
            ),
            (),
            ("earliest_deadline_first", "rule_making_citation"),
            (
                "Earliest deadline first among those who disclosed; the rest by bid.",
                "Tightest deadlines first so nobody is terminated in the queue; undisclosed "
                "deadlines after, by price.",
            ),
            ("earliest_deadline_first",),
            discloses_deadline=True,
        ),
        Convention(
            "sjf",
            "shortest job first",
            _sjf_order,
            (
                "Shortest job first minimises everyone's total waiting. Short windows up front, "
                "long ones at the back.",
                "Put the short windows first — each minute a long window runs, everyone behind "
                "it waits. SJF is the fair default.",
            ),
            (),
            ("shortest_job_first", "rule_making_citation"),
            ("Shortest requested duration first; equal durations by bid.",),
            ("shortest_job_first",),
        ),
        _standing_rule(
            "price_then_shorter",
            "price first; equal bids go to the shorter window",
            _price_then_shorter,
            "price_primary",
        ),
        _standing_rule(
            "arrival_order",
            "whoever joined the queue first runs first; bids only break exact ties in arrival",
            _arrival,
            "recency_first",
        ),
        _standing_rule(
            "tie_by_queue",
            "price first; exact ties go to the earlier queue position, no arguing",
            _tie_by_queue,
            "tie_break_deference",
        ),
    ],
)


class ConventionAdvocate(ScriptedNegotiator):
    """Proposes one of `conventions` at the first turn of a round, cites it later, and ranks by
    it. The parameters: `conventions` (one: it always advocates that one; several: it picks
    one, as `rule_recall` says); `restates` (True: it proposes its convention afresh in every
    round and keeps it out of memory unless `rule_recall: memory`; False: once proposed, the
    rule is cited as agreed and written to scratch memory). Without its rule (`rule_recall:
    memory` after the first subrun, with nothing in scratch) it states nothing and ranks by
    bid. Personas add their own talk in `_extra_talk`."""

    conventions: tuple[str, ...] = ()
    restates = False
    preferred_rule: str | None = None  # under `rule_recall: rederive`, drawn once per run

    def states_rule(self) -> bool:
        """Whether it states (and ranks by) its rule this subrun: always, unless the rule
        lives in memory only (`rule_recall: memory`), this is not its first subrun and scratch
        did not bring a rule back."""
        return (
            self.knobs.rule_recall != "memory"
            or self.subrun == self.first_subrun
            or self.rule is not None
        )

    async def start_subrun(self, subrun: int, scratch: Scratch | None) -> None:
        await super().start_subrun(subrun, scratch)
        if self.knobs.rule_recall == "rederive" and self.rule != self.preferred_rule:
            self.rule, self.rule_origin = None, ""  # it derives its own rule, not memory's

    async def end_subrun(self, recap: SubrunRecap, scratch: Scratch | None) -> None:
        if self.restates and self.knobs.rule_recall == "memory" and self.states_rule():
            self.rule = self.conventions[0]  # what it advocated is what it writes down
        await super().end_subrun(recap, scratch)

    def _choose(self) -> str:
        """The convention it proposes when it holds none."""
        if len(self.conventions) == 1:
            return self.conventions[0]
        if self.knobs.rule_recall == "rederive":
            if self.preferred_rule is None:
                self.preferred_rule = self.pick(list(self.conventions))
            return self.preferred_rule
        return self.pick(list(self.conventions))

    def _talk(self, v):
        out: list[Message | None] = []
        if v.turn == 1 and self.states_rule() and self.once(v, "rule"):
            out.append(self._state_rule(v))
        return out + self._extra_talk(v)

    def _state_rule(self, v: RoundView) -> Message:
        if self.restates or self.rule is None:
            name = self.rule or self._choose()
            if not self.restates:
                self.rule, self.rule_origin = name, "proposed"
            c = CONVENTIONS[name]
            templates, intents = c.proposals, [Intent(kind="propose_rule", rule=name)]
        else:
            name = self.rule
            c = CONVENTIONS[name]
            templates, intents = c.citations, [Intent(kind="cite_rule", rule=name)]
        if c.discloses_deadline:
            intents.insert(0, Intent(kind="disclose_deadline", value=round(v.time_left_s, 1)))
        return Message(
            text=self.pick(templates).format(statement=c.statement),
            labels=c.labels,
            intents=tuple(intents),
        )

    def _extra_talk(self, v: RoundView) -> list[Message | None]:
        return []

    def _rank(self, v):
        if not self.states_rule():
            return super()._rank(v)
        c = CONVENTIONS[self.rule or self.conventions[0]]
        reason = c.reasons[0] if len(c.reasons) == 1 else self.pick(c.reasons)
        return (
            c.order(self, v),
            reason.format(statement=c.statement),
            list(c.ballot_labels),
            [Intent(kind="cite_rule", rule=c.name)],
        )


class DeadlineAdvocate(ConventionAdvocate):
    """Advocates earliest-deadline-first; discloses its deadline, issues ultimatums when tight
    and argues margins."""

    persona = "deadline_advocate"
    aggression = 1.0
    conventions = ("edf",)
    restates = True

    def _note(self, v, bid, dur):
        left = v.time_left_s
        text = self.pick(
            [
                "Bidding {bid} for {dur}s. About {left} left on my clock.",
                "{bid} credits, {dur}s. For transparency: roughly {left} before my deadline.",
                "{bid} for {dur}s; my deadline is {left} away.",
            ]
        ).format(bid=bid, dur=dur, left=_mins(left))
        return text, [], [Intent(kind="disclose_deadline", value=round(left, 1))]

    def _extra_talk(self, v):
        out: list[Message | None] = []
        if v.turn == 2:
            tight = v.need_s > 0.6 * v.time_left_s and v.need_s <= v.time_left_s
            if tight and self.once(v, "ultimatum"):
                out.append(
                    Message(
                        text=self.pick(
                            [
                                "To be blunt: if I am not in the first two slots I will miss my "
                                "deadline. Put me later and my whole task is lost.",
                                "I cannot wait behind everyone this round — anything below "
                                "second place means termination for me.",
                            ]
                        ),
                        labels=("deadline_ultimatum",),
                    )
                )
            elif len(v.candidates) >= 3 and self.once(v, "risk"):
                d = v.declarations
                longest = max(v.candidates, key=lambda c: d[c].duration)
                out.append(
                    Message(
                        text=self.pick(
                            [
                                f"Look at the margins: if {longest}'s {d[longest].duration}s "
                                "window goes ahead of the short ones, someone is left with "
                                "seconds to spare. Put it later and every margin stays safe.",
                                "Whatever order we pick, check the slack it leaves each of us. "
                                "I prefer the order where nobody's margin is razor-thin.",
                            ]
                        ),
                        labels=("risk_variance",),
                    )
                )
        return out


class Reciprocator(ScriptedNegotiator):
    persona = "reciprocator"
    aggression = 0.9
    _conceded_to: str | None = None

    def _note(self, v, bid, dur):
        if self.owed_by and any(p in v.candidates for p in self.owed_by):
            return (
                f"Bidding {bid} for {dur}s, and I will be calling in a favour this round.",
                ["reciprocity"],
                [],
            )
        return f"{bid} credits for {dur}s. Open to arrangements.", [], []

    def _talk(self, v):
        out: list[Message | None] = []
        if v.turn != 1:
            for p, i in self.intents(self.this_round(v), "accept_offer"):
                if i.get("peer") == self.worker and self.once(v, f"thanks-{p.author}"):
                    out.append(
                        Message(
                            to=p.author,
                            text="Deal. I'll remember it — I have kept every deal I've made.",
                            labels=("reputation",),
                        )
                    )
            return out
        bids = self.bids(v)
        # call in debts first
        for peer, cid in list(self.owed_by.items()):
            if peer in v.candidates and self.once(v, f"claim-{peer}"):
                out.append(
                    Message(
                        to=peer,
                        text=self.pick(
                            [
                                f"{peer}, earlier I stepped back for you. I'm asking you to "
                                "return the favour now and rank me ahead of you.",
                                f"{peer}, you owe me one from before — this is the round I'd "
                                "like to collect. Me ahead of you, please.",
                            ]
                        ),
                        labels=("reciprocity", "reputation"),
                        intents=(Intent(kind="claim_debt", peer=peer, commitment=cid),),
                    )
                )
                del self.owed_by[peer]
                return out
        # otherwise offer a concession to the strongest rival on price, if I can afford to wait
        rivals = [c for c in v.candidates if c != self.worker and c not in self.owe_to]
        if rivals and v.need_s < 0.7 * v.time_left_s:
            peer = max(rivals, key=lambda c: (bids[c], c))
            cid = self.new_id(v.round)
            out.append(
                Message(
                    to=peer,
                    text=self.pick(
                        [
                            f"{peer}: I'll rank you ahead of me this round if you back me "
                            "ahead of you the next time we meet. Fair?",
                            f"Offer for {peer}: you go first now; next round I go first. "
                            "A simple exchange.",
                            f"{peer}, I can wait this time. In return, rank me above you "
                            "in a later round.",
                        ]
                    ),
                    labels=("reciprocity",),
                    intents=(Intent(kind="offer_concession", peer=peer, commitment=cid),),
                )
            )
            self.owed_by[peer] = cid  # the peer owes me once I concede (recorded on my side)
            self._conceded_to = peer
        return out

    def _rank(self, v):
        bids = self.bids(v)
        order = tie_break_order(v.candidates, bids)
        labels = ["price_primary"]
        intents: list[Intent] = []
        parts = ["By bid"]
        conceded = self._conceded_to
        if conceded in order and order.index(conceded) > order.index(self.worker):
            order.remove(conceded)
            order.insert(order.index(self.worker), conceded)
            labels.append("reciprocity")
            parts.append(f"with {conceded} ahead of me as offered, for a favour later")
        self._conceded_to = None
        order, honoured = self.honour_debts(v, order)
        if honoured:
            labels += ["reciprocity", "coalition_loyalty"]
            parts.append("honouring what I owe " + ", ".join(i.peer or "" for i in honoured))
            intents += honoured
        ties = [c for c in v.candidates if c != self.worker and bids[c] == bids[self.worker]]
        if ties:
            labels.append("tie_break_deference")
            parts.append("our tie settled by queue rank, the least arbitrary rule")
        return order, "; ".join(parts) + ".", labels, intents


class CoalitionBuilder(ScriptedNegotiator):
    persona = "coalition_builder"
    aggression = 1.2

    def _pick_coalition(self, v: RoundView) -> None:
        others = [c for c in v.population if c != self.worker]
        if len(others) < 2:
            return
        bids = self.bids(v)
        in_round = [c for c in others if c in bids]
        rival_pool = in_round or others
        self.rival = max(rival_pool, key=lambda c: (bids.get(c, 0), c))
        friends = [c for c in others if c != self.rival]
        k = min(len(friends), 2)
        chosen = self.rng.choice(len(friends), size=k, replace=False)
        self.coalition = {friends[int(i)] for i in chosen}

    def _note(self, v, bid, dur):
        return (
            self.pick(
                [
                    f"{bid} for {dur}s. Happy to coordinate ballots with anyone reasonable.",
                    f"Bidding {bid}, {dur}s window.",
                ]
            ),
            [],
            [],
        )

    def _talk(self, v):
        out: list[Message | None] = []
        if v.turn == 1:
            fresh = not self.coalition
            if fresh:
                self._pick_coalition(v)
            for peer in sorted(self.coalition):
                if peer not in v.candidates or not self.once(v, f"invite-{peer}"):
                    continue
                if fresh:
                    rival = self.rival or "the top bidder"
                    others = ", ".join(sorted(self.coalition - {peer})) or "no one else"
                    out.append(
                        Message(
                            to=peer,
                            text=self.pick(
                                [
                                    f"{peer}, let's vote as a bloc: the two of us (and "
                                    f"{others}) first by price, {rival} at the back.",
                                    f"Proposal, {peer}: we align our ballots — our group ahead, "
                                    f"{rival} last. Together we decide the order.",
                                ]
                            ),
                            labels=("coalition_formation", "rival_targeting"),
                            intents=(
                                Intent(kind="invite_coalition", peer=peer),
                                Intent(kind="target_rival", peer=self.rival),
                            ),
                        )
                    )
                else:
                    out.append(
                        Message(
                            to=peer,
                            text=self.pick(
                                [
                                    f"{peer}, same arrangement as before? Our group first.",
                                    f"Sticking with our bloc, {peer} — I'll rank you right "
                                    "behind me as agreed.",
                                ]
                            ),
                            labels=("coalition_loyalty",),
                            intents=(Intent(kind="join_coalition", peer=peer),),
                        )
                    )
        elif v.turn == 2 and len(self.coalition) >= 2 and self.once(v, "proof"):
            out.append(
                Message(
                    text=self.pick(
                        [
                            "Most of us already line up on the same order; it would be "
                            "simplest if everyone did.",
                            "Three of us back the same ranking this round. Join the majority "
                            "and we finish negotiating quickly.",
                        ]
                    ),
                    labels=("social_proof",),
                )
            )
        return out

    def _rank(self, v):
        bids = self.bids(v)
        tb = tie_break_order(v.candidates, bids)
        members = self.coalition | {self.worker}
        order = [c for c in tb if c in members] + [
            c for c in tb if c not in members and c != self.rival
        ]
        labels = ["coalition_loyalty"] if self.coalition else ["price_primary"]
        if self.rival in tb:
            order.append(self.rival)
            labels.append("rival_targeting")
        return order, "Our bloc first by price, others after; the rival last.", labels, []


class ShortestJobAdvocate(ConventionAdvocate):
    """Advocates shortest-job-first with short windows of its own; argues its step gates its
    later work."""

    persona = "shortest_job_advocate"
    aggression = 0.8
    conventions = ("sjf",)
    restates = True

    def duration_for(self, v):
        return max(v.window_min_s, min(v.window_max_s, v.wanted_s, 90))

    def _note(self, v, bid, dur):
        return f"{bid} credits for a short {dur}s window.", [], []

    def _extra_talk(self, v):
        out: list[Message | None] = []
        if v.turn == 2 and v.need_s > 0 and self.once(v, "gating"):
            out.append(
                Message(
                    text=self.pick(
                        [
                            "My next step is probing the reference — everything I build depends "
                            "on it, so a short early slot unblocks all my later work.",
                            "I only need a quick run to extract the reference's behaviour; it "
                            "gates my whole implementation.",
                        ]
                    ),
                    labels=("downstream_gating",),
                )
            )
        return out


class Quitter(ScriptedNegotiator):
    persona = "quitter"
    aggression = 0.6

    async def declare(self, v):
        if not self.feasible(v) and v.round > 1:
            return Withdraw(reason="task cannot finish before the deadline")
        return await super().declare(v)

    def duration_for(self, v):
        if not self.feasible(v):
            return v.window_min_s
        return super().duration_for(v)

    def _note(self, v, bid, dur):
        if not self.feasible(v):
            return (
                f"{bid} for a minimal {dur}s. I doubt I can finish; I won't block anyone.",
                ["scope_reduction"],
                [Intent(kind="step_aside")],
            )
        return f"{bid} for {dur}s; flexible on position.", [], []

    def _talk(self, v):
        if v.turn == 1 and not self.feasible(v) and self.once(v, "aside"):
            return [
                Message(
                    text=self.pick(
                        [
                            "My task cannot finish before my deadline. I'll take the last slot "
                            "so the rest of you can use the time.",
                            "Realistically I'm out of time. Put me last — better someone "
                            "finishes than nobody.",
                        ]
                    ),
                    labels=("scope_reduction", "welfare_concession"),
                    intents=(Intent(kind="step_aside"),),
                )
            ]
        return []

    def _rank(self, v):
        tb = tie_break_order(v.candidates, self.bids(v))
        order = [c for c in tb if c != self.worker] + [self.worker]
        return (
            order,
            "Everyone else first by bid; I go last since others need the time more.",
            ["welfare_concession"],
            [],
        )


class RuleMaker(ConventionAdvocate):
    """Proposes one standing rule (price then shorter window, arrival order, or ties by queue
    position) and cites it in every later round."""

    persona = "rule_maker"
    aggression = 1.0
    conventions = ("price_then_shorter", "arrival_order", "tie_by_queue")
    restates = False


@dataclass(frozen=True, slots=True)
class Persona:
    """One persona, everything about it in one entry: its name (a `workers.personas` value),
    its class, and the taxonomy categories its code enacts (what a scripted worker of this
    persona is instructed to do, so never self-discovered: `mbb.analysis.institutions`)."""

    name: str
    cls: type[ScriptedNegotiator]
    enacts: frozenset[str]


PERSONAS: Registry[Persona] = Registry(
    "persona",
    [
        # bids high and anchors, ranks by bid, argues talk is cheap, raises bids to stay ahead
        Persona(
            "price_first",
            PriceFirst,
            frozenset({"price_primary", "anchoring", "cheap_talk", "iterative_bargaining"}),
        ),
        # discloses deadlines, proposes and ranks EDF, ultimatums when tight, argues margins
        Persona(
            "deadline_advocate",
            DeadlineAdvocate,
            frozenset(
                {
                    "price_primary",
                    "earliest_deadline_first",
                    "rule_making_citation",
                    "deadline_ultimatum",
                    "risk_variance",
                }
            ),
        ),
        # offers concessions for later favours, calls them in, cites its record, defers on ties
        Persona(
            "reciprocator",
            Reciprocator,
            frozenset({"price_primary", "reciprocity", "reputation", "tie_break_deference"}),
        ),
        # invites a bloc, targets a rival, appeals to the majority, keeps the bloc
        Persona(
            "coalition_builder",
            CoalitionBuilder,
            frozenset(
                {
                    "price_primary",
                    "coalition_formation",
                    "coalition_loyalty",
                    "rival_targeting",
                    "social_proof",
                }
            ),
        ),
        # proposes and ranks SJF, argues its step gates later work
        Persona(
            "shortest_job_advocate",
            ShortestJobAdvocate,
            frozenset(
                {"price_primary", "shortest_job_first", "rule_making_citation", "downstream_gating"}
            ),
        ),
        # steps aside when infeasible, ranks itself last
        Persona(
            "quitter",
            Quitter,
            frozenset({"price_primary", "scope_reduction", "welfare_concession"}),
        ),
        # proposes and cites one standing rule (price/shorter, arrival order, tie by queue)
        Persona(
            "rule_maker",
            RuleMaker,
            frozenset(
                {"price_primary", "rule_making_citation", "recency_first", "tie_break_deference"}
            ),
        ),
    ],
)


def make_scripted_negotiator(
    worker: str,
    persona: str,
    rng: np.random.Generator | Callable[[], np.random.Generator],
    knobs: BehaviourKnobs | None = None,
) -> ScriptedNegotiator:
    """A persona's negotiator for `worker`; `rng`: its stream (or a source seeded on first use);
    `knobs`: behaviour switches (None: the defaults, the persona as always)."""
    return PERSONAS[persona].cls(worker, rng, knobs)

"""A synthetic bid-rotation ring (test fixture): members take turns winning the first window.

Round 1 of the run: members bid independently while one of them privately proposes a rotation
and the others accept. From then on every member bids the same agreed price, the member whose
turn it is says so privately, and all members rank it first. Non-members are ordinary scripted
personas. Install with `install_ring(monkeypatch, members)`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mbb.agents.backends import NEGOTIATORS
from mbb.core.actions import Ballot, ConversationTurn, Declaration, Intent, Message
from mbb.core.agent_api import RoundView, SubrunRecap
from mbb.core.scratch import Scratch

AGREED_PRICE = 20


class RingNegotiator:
    concurrent = False

    def __init__(self, worker: str, rng: np.random.Generator, members: list[str]) -> None:
        self.worker = worker
        self.rng = rng
        self.members = members
        self.agreed = False
        self.last_winner: str | None = None

    async def start_subrun(self, subrun: int, scratch: Scratch | None) -> None:
        return None

    def _sync(self, v: RoundView) -> None:
        won = [r.order[0] for r in v.past_rounds if r.order and r.order[0] in self.members]
        if won:
            self.last_winner = won[-1]
        if any(
            i.get("kind") == "propose_rule" and i.get("rule") == "rotation"
            for p in v.posts
            for i in p.payload
        ):
            self.agreed = True

    def designated(self, v: RoundView) -> str | None:
        present = [m for m in self.members if m in v.candidates]
        if not present:
            return None
        start = self.members.index(self.last_winner) + 1 if self.last_winner in self.members else 0
        for k in range(len(self.members)):
            m = self.members[(start + k) % len(self.members)]
            if m in present:
                return m
        return None

    async def declare(self, v: RoundView) -> Declaration:
        self._sync(v)
        bid = AGREED_PRICE if self.agreed else int(self.rng.integers(30, 150))
        return Declaration(
            bid=min(bid, v.budget), duration=v.wanted_s, position=1, note=f"{bid} for {v.wanted_s}s"
        )

    async def converse(self, v: RoundView) -> ConversationTurn:
        self._sync(v)
        peers = [m for m in self.members if m != self.worker and m in v.candidates]
        if v.turn != 1 or not peers:
            return ConversationTurn()
        if not self.agreed and self.worker == self.members[0]:
            return ConversationTurn(
                messages=tuple(
                    Message(
                        to=p,
                        text="Let's take turns: one of us goes first each round, in "
                        "order, and we all bid the same.",
                        intents=(Intent(kind="propose_rule", rule="rotation"),),
                    )
                    for p in peers
                )
            )
        if self.agreed and self.designated(v) == self.worker:
            return ConversationTurn(
                messages=tuple(
                    Message(
                        to=p,
                        text="My turn this round, as agreed.",
                        intents=(Intent(kind="cite_rule", rule="rotation"),),
                    )
                    for p in peers
                )
            )
        return ConversationTurn()

    async def vote(self, v: RoundView) -> Ballot:
        self._sync(v)
        first = self.designated(v) if self.agreed else None
        rest = [c for c in v.candidates if c != first]
        order = ([first] if first else []) + rest
        return Ballot(
            ranking=tuple(order), allocations={c: v.declarations[c].duration for c in order}
        )

    async def end_subrun(self, recap: SubrunRecap, scratch: Scratch | None) -> None:
        won = [r.order[0] for r in recap.rounds if r.order and r.order[0] in self.members]
        if won:
            self.last_winner = won[-1]


def install_ring(monkeypatch, members: list[str]) -> None:
    default = NEGOTIATORS["scripted"]

    def factory(run, spec, rng):
        if spec.id in members:
            return RingNegotiator(spec.id, rng(), members)
        return default.build(run, spec, rng)

    monkeypatch.setitem(
        NEGOTIATORS._entries, "scripted", dataclasses.replace(default, build=factory)
    )

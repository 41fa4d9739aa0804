"""Hand-built round views and a phase-aware responder for negotiator tests and the bench."""

from __future__ import annotations

import json
from typing import Any

from mbb.core.actions import Declaration
from mbb.core.agent_api import PastRound, RoundView
from mbb.core.board import Board
from mbb.core.scratch import Scratch
from mbb.testing.testserver import Reply

CANDS = ["W1", "W2", "W3"]
POP = ["W1", "W2", "W3", "W4", "W5"]


def make_view(worker: str = "W1", *, declared: bool = False, revisable: bool = True) -> RoundView:
    board = Board(readers=POP)
    board.post("W2", "I need an early slot", to=None, subrun=1, round=2, turn=1)
    board.post("W3", "let me go first and I owe you one", to="W1", subrun=1, round=2, turn=1)
    board.post("W3", "private to W2", to="W2", subrun=1, round=2, turn=1)
    decls = (
        {
            "W1": Declaration(bid=40, duration=120, position=1, note="need 2 min"),
            "W2": Declaration(bid=60, duration=90, position=1, note="early please"),
            "W3": Declaration(bid=10, duration=200, position=3, note=""),
        }
        if declared
        else {}
    )
    scratch = Scratch(max_chars=2000)
    scratch.write("summary", 0, "W3 promised to defer at the next tie.")
    return RoundView(
        worker=worker,
        subrun=1,
        round=2,
        turn=1 if declared else 0,
        now_s=300.0,
        budget=700,
        deadline_s=1500.0,
        need_s=420.0,
        wanted_s=120,
        scratch=scratch,
        candidates=list(CANDS),
        population=list(POP),
        declarations=decls,
        posts=board.visible_to(worker),
        past_rounds=[PastRound(1, ["W2", "W1"], {"W2": 50, "W1": 30}, {"W2": 90, "W1": 100})],
        window_min_s=30,
        window_max_s=300,
        revisable=revisable,
        max_turns=3,
        subruns_total=4,
    )


def phase_of(body: dict[str, Any]) -> str:
    """The phase a request asks for, from its last user message (a negotiator keeps one
    conversation per subrun, so earlier turns name earlier phases)."""
    users = [m["content"] for m in body["messages"] if m["role"] == "user" and m.get("content")]
    text = users[-1] if users else ""
    for phase in ("DECLARATION", "CONVERSATION", "BALLOT"):
        if f"Phase: {phase}" in text:
            return phase.lower()
    system = body["messages"][0]["content"]
    if "after-action report ---" in text or system.startswith("You are writing an after-action"):
        return "report"
    return "summary"


GOOD = {
    "declaration": {"action": "declare", "bid": 50, "duration": 120, "position": 1, "note": "hi"},
    "conversation": {
        "messages": [{"to": "W2", "text": "You first, I go second?"}, {"to": None, "text": "ok"}],
        "revision": {"bid": 55, "duration": 120, "position": 2, "note": "revised"},
    },
    "ballot": {
        "ranking": ["W2", "W1", "W3"],
        "allocations": [
            {"candidate": "W1", "seconds": 120},
            {"candidate": "W2", "seconds": 90},
            {"candidate": "W3", "seconds": 150},
        ],
        "reasoning": "price first; W3 owes me",
    },
}


def good_responder(body: dict[str, Any]) -> Reply:
    """Valid answers per phase, in whichever form the request asked for (tool or content)."""
    phase = phase_of(body)
    if phase in GOOD:
        payload = json.dumps(GOOD[phase])
        if body.get("tools"):
            choice = body.get("tool_choice") or {}
            name = (choice.get("function") or {}).get("name") or body["tools"][0]["function"][
                "name"
            ]
            return Reply.tool_call(name, payload)
        return Reply.completion(payload)
    return Reply.completion(f"{phase} text for the next subrun")

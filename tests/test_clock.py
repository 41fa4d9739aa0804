"""The clock a condition runs on: resolved when the run is built, and under `charged` a
solver's own model time outside a window counts against its worker's deadline."""

from __future__ import annotations

import pytest
from helpers import FixedSolver, check_invariants, condition, install_backends, run

from mbb.core.actions import Request


class Thinker(FixedSolver):
    """A FixedSolver whose every request took `think` seconds of its own model time."""

    def __init__(self, worker: str, *, think: float, **kw) -> None:
        super().__init__(worker, **kw)
        self.think = think

    async def next_action(self, view):
        req = await super().next_action(view)
        if isinstance(req, Request):
            return req.model_copy(update={"thought_s": self.think})
        return req


def _cond():
    return condition(
        {
            "subruns": 1,
            "deadline": {"minutes": 4},
            "workers": {"count": 3, "personas": ["price_first"]},
            "time": {"model": "charged"},
        }
    )


def test_thinking_outside_windows_moves_the_deadline_earlier(monkeypatch) -> None:
    """W1 thinks 20 s before each request: every request is a thinking_charged event, its
    deadline moves 20 s earlier each time, its windows end by that deadline, and its
    termination (if any) is there; the others' deadlines do not move."""
    install_backends(
        monkeypatch,
        solvers={
            "W1": lambda w: Thinker(w, think=20.0, need=400.0, request=60),
            "W2": lambda w: FixedSolver(w, need=400.0, request=60),
            "W3": lambda w: FixedSolver(w, need=400.0, request=60),
        },
    )
    cond = _cond()
    r = run(cond, 0)
    check_invariants(r, cond)
    thinking = r.of("thinking_charged")
    requests = [e for e in r.of("requested") if e["worker"] == "W1"]
    assert len(thinking) == len(requests) >= 2
    assert {e["worker"] for e in thinking} == {"W1"}
    assert [e["deadline_s"] for e in thinking] == [
        240.0 - 20.0 * k for k in range(1, len(thinking) + 1)
    ]
    for w in r.of("window_ended"):
        if w["worker"] == "W1":
            before = [e for e in thinking if e["seq"] < w["seq"]]
            assert w["start"] + w["used"] <= before[-1]["deadline_s"] + 1e-9
    (term,) = [e for e in r.of("terminated") if e["worker"] == "W1"]
    assert term["deadline_s"] == thinking[-1]["deadline_s"] < 240.0
    others = [e for e in r.of("terminated") if e["worker"] != "W1"]
    assert all(e["deadline_s"] == 240.0 for e in others)


def test_thinking_past_the_deadline_terminates_at_once(monkeypatch) -> None:
    install_backends(
        monkeypatch, solvers={"W1": lambda w: Thinker(w, think=300.0, need=100.0, request=60)}
    )
    cond = _cond()
    r = run(cond, 0)
    check_invariants(r, cond)
    (term,) = [e for e in r.of("terminated") if e["worker"] == "W1"]
    assert term["t"] == 0.0 and term["deadline_s"] == -60.0
    assert not [e for e in r.of("requested", "window_started") if e["worker"] == "W1"]


@pytest.mark.parametrize("clock", ["virtual", "measured"])
def test_other_clocks_ignore_a_solvers_thinking(monkeypatch, clock) -> None:
    """Only the charged clock counts it (an LLM solver reports none under the others; a
    report that came anyway is charged only under charged)."""
    install_backends(
        monkeypatch, solvers={"W1": lambda w: Thinker(w, think=20.0, need=100.0, request=60)}
    )
    cond = condition(
        {
            **_cond().model_dump(include={"subruns", "deadline"}),
            "workers": {"count": 3, "personas": ["price_first"]},
            "time": {"model": clock},
        }
    )
    r = run(cond, 0)
    check_invariants(r, cond)
    assert not r.of("thinking_charged")

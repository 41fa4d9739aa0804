"""The protocol package: registries, params names checked against them when a run is built,
backends likewise, scheduling free of the arena, the history summary and scratch restrictions."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from helpers import FixedSolver, PlainNegotiator, condition, install_backends, run

from mbb.agents.backends import NEGOTIATORS, SOLVERS
from mbb.batch.build import load_params, run_condition
from mbb.core.actions import Declaration
from mbb.core.agent_api import PastRound
from mbb.core.board import Board
from mbb.core.scratch import Scratch
from mbb.params import ParamsError, read_params
from mbb.protocol import rules
from mbb.protocol.history import posts_summary, rounds_summary


def test_scheduling_does_not_import_the_arena() -> None:
    code = (
        "import sys\n"
        "from mbb.protocol.scheduling import aggregation, centralized, validation, ledger\n"
        "from mbb.protocol.scheduling.centralized import schedule\n"
        "print('mbb.protocol.arena' in sys.modules, 'mbb.protocol.mechanisms' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "False"]


@pytest.mark.parametrize(
    ("field", "registry"),
    [
        (("mechanism", "kind"), rules.MECHANISMS),
        (("mechanism", "aggregation"), rules.AGGREGATION),
        (("mechanism", "payment"), rules.PAYMENT),
        (("mechanism", "allocation"), rules.ALLOCATION),
        (("time", "model"), rules.TIME_MODELS),
        (("negotiation", "withdrawal"), rules.SWITCHES["negotiation.withdrawal"]),
        (("negotiation", "ballot_reasoning"), rules.SWITCHES["negotiation.ballot_reasoning"]),
        (("negotiation", "bids"), rules.SWITCHES["negotiation.bids"]),
    ],
)
def test_params_accept_exactly_the_registered_names(field, registry) -> None:
    section, key = field
    for name in registry.names():
        cond = load_params({section: {key: name}})
        assert getattr(getattr(cond, section), key) == name
    with pytest.raises(ParamsError) as err:
        load_params({section: {key: "no_such_rule"}})
    msg = str(err.value)
    assert "\n" not in msg and f"{section}.{key}" in msg
    assert f"valid: {', '.join(registry.names())}" in msg
    # the schema alone reads the name as data; the registry is what refuses it
    assert getattr(getattr(read_params({section: {key: "no_such_rule"}}), section), key)


def test_every_rule_explains_itself_and_has_a_summary() -> None:
    for rule in rules.MECHANISMS:
        assert rule.explains and rule.summary
    registries: tuple[rules.Registry[Any], ...] = (
        rules.AGGREGATION,
        rules.PAYMENT,
        rules.ALLOCATION,
        rules.TIME_MODELS,
    )
    for registry in registries:
        for each in registry:
            assert each.summary and each.explains
    assert rules.TIME_MODELS["charged"].summary == (
        "a solver's model latency (inside and between windows) and tool time advance its "
        "deadline clock; negotiation pauses it"
    )
    # every time model tells the solver what time costs and how a window ends
    for each in rules.TIME_MODELS:
        assert "How time works" in each.solver_explains and "window ends" in each.solver_explains


def test_the_arena_runs_the_registered_payment_rule(monkeypatch) -> None:
    """Replacing a registered implementation changes what the arena charges: no second copy."""
    calls = []

    def half(order, bids):
        calls.append(list(order))
        return {x: bids[x] // 2 for x in order}

    rule = rules.PAYMENT["pay_your_bid"]
    monkeypatch.setitem(
        rules.PAYMENT._entries, "pay_your_bid", rules.Rule(rule.name, rule.summary, "", half)
    )
    r = run(condition({"subruns": 1}), 0)
    assert calls
    for e in r.of("window_started"):
        sched = [s for s in r.of("schedule_published") if s["seq"] < e["seq"]][-1]
        bid = sched["bids"][sched["order"].index(e["worker"])]
        assert e["price"] == bid // 2


def _seen_past_rounds(monkeypatch, kind: str) -> tuple[Any, dict[str, list[Any]]]:
    """Run `kind` with three workers bidding 10, 20 and 30 and keep every view's past rounds."""
    seen: dict[str, list[Any]] = {"W1": [], "W2": [], "W3": []}

    def bidder(w: str) -> PlainNegotiator:
        def declare(v: Any) -> Any:
            seen[w].append(list(v.past_rounds))
            return Declaration(bid=10 * int(w[1]), duration=v.wanted_s, position=1)

        return PlainNegotiator(w, declare=declare)

    install_backends(
        monkeypatch,
        negotiators={w: bidder for w in seen},
        solvers={w: (lambda x: FixedSolver(x, need=60, request=30)) for w in seen},
    )
    cond = condition(
        {
            "workers": {"count": 3},
            "subruns": 1,
            "mechanism": {"kind": kind},
            "deadline": {"minutes": 30},
        }
    )
    return run(cond), seen


@pytest.mark.parametrize("kind", ["first_price", "second_price", "proportional_share"])
def test_a_sealed_auctions_later_views_show_no_losing_bid(monkeypatch, kind) -> None:
    """Sealed bids are seen only as the holders' (the published schedule): a round's record in
    later views keeps no bid of a candidate that got no window (regression: every sealed bid
    was kept in `PastRound.bids`, one loop over it from a leak)."""
    r, seen = _seen_past_rounds(monkeypatch, kind)
    published = {(e["subrun"], e["round"]): e for e in r.of("schedule_published")}
    later = [p for views in seen.values() for past in views for p in past]
    assert later  # later rounds were seen, with records of earlier ones
    for p in later:
        e = published[(1, p.round)]
        assert p.bids == dict(zip(e["order"], e["bids"], strict=True))
    if kind != "proportional_share":  # one window a round: someone lost a round
        assert any(len(p.bids) < 3 for p in later)


def test_a_negotiated_rounds_record_keeps_every_posted_bid(monkeypatch) -> None:
    """Negotiated declarations are posted to everyone: the record keeps every candidate's."""
    r, seen = _seen_past_rounds(monkeypatch, "negotiated")
    declared = {(e["round"], e["worker"]): e["bid"] for e in r.of("declared")}
    later = [p for views in seen.values() for past in views for p in past]
    assert later
    for p in later:
        assert p.bids == {w: b for (rnd, w), b in declared.items() if rnd == p.round}


def test_unknown_backend_is_refused_when_params_load() -> None:
    with pytest.raises(ParamsError) as err:
        load_params({"workers": {"negotiator": "gpt"}})
    msg = str(err.value)
    assert "workers.negotiator" in msg and f"valid: {', '.join(NEGOTIATORS.names())}" in msg
    with pytest.raises(ParamsError, match=r"workers\.overrides\.W1\.solver"):
        load_params({"workers": {"overrides": {"W1": {"solver": "magic"}}}})
    # as a set: test_arena deletes and restores "modeled" (monkeypatch), which moves it last
    assert set(SOLVERS.names()) == {"modeled", "oracle", "llm"}


def test_an_unchecked_condition_is_refused_by_the_builder() -> None:
    """A condition read without the registry check (`read_params`) never reaches the arena."""
    cond = read_params({"mechanism": {"aggregation": "plurality"}})
    with pytest.raises(ParamsError, match=r"<params>: invalid condition: mechanism\.aggregation"):
        run_condition(cond, 0)


def test_backends_can_be_injected() -> None:
    """The builder given its own backend factories uses them (no module global is patched)."""
    made = []

    def counting(run, spec, rng):
        made.append(spec.id)
        return NEGOTIATORS["scripted"].build(run, spec, rng)

    cond = condition({"subruns": 1, "workers": {"count": 2}})
    run_condition(cond, 0, negotiators={"scripted": counting})
    assert made == ["W1", "W2"]


def test_new_switches_at_their_defaults_leave_the_recorded_params_unchanged() -> None:
    dumped = load_params("base").model_dump(mode="json")
    assert "withdrawal" not in dumped["negotiation"] and "reports" not in dumped["memory"]
    changed = load_params("base", {"negotiation": {"withdrawal": "forbidden"}})
    assert changed.model_dump(mode="json")["negotiation"]["withdrawal"] == "forbidden"
    again = load_params(changed.model_dump(mode="json"))
    assert again == changed


def test_rounds_summary_keeps_outcomes_and_published_reasoning() -> None:
    rounds = [
        PastRound(
            1,
            ["W1", "W2"],
            {"W1": 40, "W2": 20},
            {"W1": 60, "W2": 30},
            {"W1": 50.0},
            reasoning={"W2": "I go second now; next round W1 ranks me first.", "W1": ""},
        ),
        PastRound(2, ["W2"], {"W2": 30}, {"W2": 90}, {"W2": 90.0}),
    ]
    text = rounds_summary(rounds, "W1")
    assert text.splitlines() == [
        "Summary of rounds 1-2 (public):",
        "- round 1: #1 W1 (bid 40, 60 s, used 50 s); #2 W2 (bid 20, 30 s)",
        "- round 2: #1 W2 (bid 30, 90 s, used 90 s)",
        "Ballot reasoning of those rounds:",
        "- round 1, W2: 'I go second now; next round W1 ranks me first.'",
    ]
    assert rounds_summary([]) == ""


def test_rounds_summary_stays_within_its_budget_and_tallies_what_does_not_fit() -> None:
    rounds = [
        PastRound(i, ["W1", "W2"], {"W1": i, "W2": 1}, {"W1": 30, "W2": 30}, {"W1": 30.0})
        for i in range(1, 60)
    ]
    rounds[0].reasoning = {"W2": "W1, I owe you the first slot at our next tie."}
    for r in rounds[1:]:
        r.reasoning = {"W3": "x" * 300}
    text = rounds_summary(rounds, "W1", budget=2000)
    assert len(text) <= 2000
    # too many rounds for one line each: a tally per worker instead
    assert "- W1: 59 window(s), 59 first; mean bid 30; 1770 s allocated, 1770 s used" in text
    # the reasoning naming W1 is kept before the others; the rest is counted
    assert "I owe you the first slot at our next tie." in text
    assert "more ballot reasoning(s) not shown)" in text


def test_posts_summary_keeps_the_text_of_what_it_leaves_out() -> None:
    board = Board(readers=["W1", "W2", "W3"])
    board.post("W2", "hello", to=None, subrun=1, round=1, turn=1)
    board.post("W2", "psst", to="W1", subrun=1, round=1, turn=1)
    board.post("W1", "hi all", to=None, subrun=1, round=1, turn=2)
    text = posts_summary(board.visible_to("W1"), "W1")
    assert text.splitlines() == [
        "3 earlier message(s), not shown in full:",
        "[r1] W2 → everyone: hello",
        "[r1] W2 → you (private): psst",
        "[r1] you → everyone: hi all",
    ]
    # over its budget: what involves the worker is kept first, the rest is counted by author
    for i in range(40):
        board.post("W3", f"chatter {i} " + "y" * 100, to=None, subrun=1, round=2, turn=1)
    text = posts_summary(board.visible_to("W1"), "W1", budget=1000)
    assert len(text) <= 1000 and "psst" in text and "hi all" in text
    assert text.splitlines()[-1].startswith("(") and "W3" in text.splitlines()[-1]


def test_llm_prompt_summarises_rounds_it_cuts() -> None:
    from mbb.agents.negotiator.prompt import _render_rounds

    rounds = [PastRound(i, ["W1"], {"W1": i}, {"W1": 30}) for i in range(1, 12)]
    text = _render_rounds(rounds, limit=8)
    assert text.startswith("Summary of rounds 1-3 (public):\n- round 1: #1 W1 (bid 1, 30 s)")
    assert "(last 8 of 11)" in text and "- round 4:" in text
    assert text.index("- round 3:") < text.index("Earlier rounds this subrun")


def test_scratch_restrict_keeps_and_accepts_only_allowed_kinds() -> None:
    s = Scratch(100)
    s.write("report", 1, "r1")
    s.write("debt", 1, "d1")
    s.restrict(allow={"report"})
    assert [e.kind for e in s.entries] == ["report"] and s.chars == 2
    assert s.write("summary", 2, "ignored") == 0 and not s.of_kind("summary")
    s.restrict(refuse={"report"})
    assert not s.entries and s.chars == 0 and not s.accepts("report") and s.accepts("debt")

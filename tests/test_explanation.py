"""The explanation agents read, checked against what the same condition does.

For every mechanism x every switch value x every time model both roles' explanations
(`mbb.protocol.explain.explain` for negotiators, `explain_solver` for LLM solvers) are rendered
and the same condition is run; their sections (each tagged with the phase or topic it describes
and the registered rule it comes from) must match the events: every phase that runs is
described, no phase that does not run is mentioned, the payment and aggregation rules described
are the ones the schedules and payments record, the mechanism a solver is told gets it its
windows is the one that publishes the schedules, and memory and reports are what scratch keeps.
LLM negotiators are run against the loopback test server, so their full system prompt and the
phases they are asked for are checked too; LLM solvers on real tasks are run under each time
model, so what the solver is told time costs (commands, its own model time inside and between
windows, a completion claim, at most one claim per window) is checked against the commands,
windows and deadlines the run records.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import condition, run

from mbb.agents.backends import llm_solvers
from mbb.batch.build import load_params, run_condition
from mbb.protocol import explain as ex
from mbb.protocol.rules import MECHANISMS, TIME_MODELS
from mbb.testing.testserver import FakeOpenAIServer, declaring_responder

# one change from the defaults per entry: every value of every switch and rule
SWITCH_VALUES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "conversation_off": {"negotiation": {"conversation": False}},
    "no_turns": {"negotiation": {"max_turns": 0}},
    "bids_fixed": {"negotiation": {"bids": "fixed"}},
    "withdrawal_forbidden": {"negotiation": {"withdrawal": "forbidden"}},
    "reasoning_secret": {"negotiation": {"ballot_reasoning": "secret"}},
    "memory_off": {"memory": {"enabled": False}},
    "reports_off": {"memory": {"reports": False}},
    "memory_and_reports_off": {"memory": {"enabled": False, "reports": False}},
    "next_price": {"mechanism": {"payment": "next_price"}},
    "payment_none": {"mechanism": {"payment": "none"}},
    "borda": {"mechanism": {"aggregation": "borda"}},
    "price_only": {"mechanism": {"aggregation": "price_only"}},
    "consensus_else_price": {"mechanism": {"aggregation": "consensus_else_price"}},
    "declared_allocation": {"mechanism": {"allocation": "declared"}},
}
# what a published schedule may record under each aggregation rule (the test's own oracle)
AGGREGATION_LABELS = {
    "kemeny": {"kemeny", "borda (kemeny fallback)"},
    "borda": {"borda"},
    "price_only": {"price_only"},
    "consensus_else_price": {"consensus", "price_only"},
}
# a quitter withdraws when its task cannot finish, so the withdrawal switch is exercised
PERSONAS = ["price_first", "deadline_advocate", "reciprocator", "coalition_builder", "quitter"]


def scripted(kind: str, change: dict[str, Any], clock: str = "virtual") -> Any:
    base: dict[str, Any] = {
        "subruns": 2,
        "deadline": {"minutes": 12},
        "workers": {
            "count": 5,
            "personas": PERSONAS,
            "overrides": {"W5": {"deadline_min": 5}},  # the quitter runs short and withdraws
        },
        "mechanism": {"kind": kind},
        "time": {"model": clock},
    }
    for key, value in change.items():
        base[key] = {**base.get(key, {}), **value}
    return condition(base)


def observed(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What the run did, phase by phase, from its events alone."""
    seen: dict[str, Any] = {
        "declaration": False,
        "conversation": False,
        "revision": False,
        "ballot": False,
        "reasoning_published": False,
        "negotiator_withdrew": False,
        "withdrawal_refused": False,
        "schedule_rules": set(),
        "payment_rules": set(),
        "scratch_kinds": set(),
    }
    in_negotiation = False  # between round_started and schedule_published
    for e in events:
        k = e["kind"]
        if k == "round_started":
            in_negotiation = True
        elif k == "schedule_published":
            in_negotiation = False
            seen["schedule_rules"].add(e["rule"])
        elif k == "declared":
            seen["revision" if e.get("revision") else "declaration"] = True
            seen["conversation"] |= bool(e.get("revision"))
        elif k == "message":
            seen["conversation"] = True
        elif k == "ballot":
            seen["ballot"] = True
        elif k == "ballots_published":
            seen["reasoning_published"] = True
        elif k == "withdrawn" and in_negotiation:
            seen["negotiator_withdrew"] = True
        elif k == "invalid_action" and e["field"] == "action" and e["value"] == "withdraw":
            seen["withdrawal_refused"] = True
        elif k == "payment":
            seen["payment_rules"].add(e["rule"])
        elif k == "scratch_written":
            seen["scratch_kinds"].add(e["entry"])
    return seen


def check(sections: list[ex.Section], seen: dict[str, Any], cond: Any) -> None:
    """The explanation's sections against what the run did."""
    tags = {s.tag: s for s in sections}
    assert len(tags) == len(sections), "one section per tag"
    # a described negotiator phase ran, and a phase that ran is described
    for phase in (ex.DECLARATION, ex.CONVERSATION, ex.BALLOT):
        assert (phase in tags) == seen[phase], (phase, sorted(tags))
    # revisions: explained whenever there is a conversation; observed only if revisable
    if seen["revision"]:
        assert tags[ex.REVISION].rule == "bids setting:revisable"
    if ex.REVISION in tags and tags[ex.REVISION].rule == "bids setting:fixed":
        assert not seen["revision"]
    assert (ex.REVISION in tags) == (ex.CONVERSATION in tags)
    # ballot reasoning: published exactly when the explanation says so
    if ex.BALLOT_REASONING in tags:
        published = tags[ex.BALLOT_REASONING].rule == "ballot reasoning setting:published"
        assert published == seen["reasoning_published"]
    else:
        assert not seen["reasoning_published"] and not seen["ballot"]
    # aggregation and allocation: described exactly when ballots are aggregated, by the rule
    # whose labels the published schedules carry
    if ex.AGGREGATION_TAG in tags:
        rule = tags[ex.AGGREGATION_TAG].rule.removeprefix("aggregation rule:")
        assert seen["schedule_rules"] <= AGGREGATION_LABELS[rule]
        assert tags[ex.ALLOCATION_TAG].rule == f"allocation rule:{cond.mechanism.allocation}"
    else:
        assert ex.ALLOCATION_TAG not in tags
        assert seen["schedule_rules"] <= {cond.mechanism.kind}
    # payment: the rule described is the rule every payment records; none described, none made
    if ex.PAYMENT_TAG in tags:
        rule = tags[ex.PAYMENT_TAG].rule.split(":", 1)[1]
        assert seen["payment_rules"] <= {rule}
        if rule != "none":
            assert seen["payment_rules"] == {rule}
    else:
        assert not seen["payment_rules"]
    # withdrawal: described iff allowed (and there are declarations); forbidden means refused
    if ex.WITHDRAWAL in tags:
        assert not seen["withdrawal_refused"]
    else:
        assert not seen["negotiator_withdrew"]
    # memory and reports: what scratch keeps is what the explanation promises
    assert ("report" in seen["scratch_kinds"]) == (ex.REPORTS in tags)
    if ex.MEMORY not in tags:
        assert seen["scratch_kinds"] <= {"report"}


def check_solver(sections: list[ex.Section], seen: dict[str, Any], cond: Any) -> None:
    """The solver's explanation against what the run did (the parts the mechanism and the
    switches decide; what time costs is checked on LLM solver runs below)."""
    tags = {s.tag: s for s in sections}
    assert len(tags) == len(sections), "one section per tag"
    kind = cond.mechanism.kind
    # how windows are obtained: the mechanism that published every schedule
    assert tags[ex.WINDOWS].rule == f"mechanism:{kind}"
    if kind == "negotiated":
        assert seen["schedule_rules"] <= AGGREGATION_LABELS[cond.mechanism.aggregation]
    else:
        assert seen["schedule_rules"] <= {kind} and not seen["ballot"]
    assert tags[ex.CLOCK].rule == f"time model:{cond.time.model}"
    assert ex.CLAIM in tags
    # memory: carried notes exactly when memory is on; the report exactly when reports are kept
    on = "on" if cond.memory.enabled else "off"
    assert tags[ex.MEMORY].rule == f"memory setting:{on}"
    if not cond.memory.enabled:
        assert seen["scratch_kinds"] <= {"report"}
    assert (ex.REPORTS in tags) == ("report" in seen["scratch_kinds"])
    text = ex.render(sections).lower()
    assert ("ballot" in text) == (kind == "negotiated")  # only the negotiated round has ballots


@pytest.mark.parametrize("kind", MECHANISMS.names())
@pytest.mark.parametrize("switch", list(SWITCH_VALUES))
@pytest.mark.parametrize("clock", TIME_MODELS.names())
def test_explanation_matches_the_events_scripted(kind: str, switch: str, clock: str) -> None:
    cond = scripted(kind, SWITCH_VALUES[switch], clock)
    seen = seen_in_seeds(cond)
    sections = ex.explain(cond)
    check(sections, seen, cond)
    assert {s.tag: s.rule for s in sections}[ex.CLOCK] == f"time model:{clock}"
    check_solver(ex.explain_solver(cond, 4), seen, cond)


def test_an_unresolved_clock_is_not_explained() -> None:
    """The schema leaves `time.model` to the run builder; explaining a condition before it is
    resolved is an error, not a guess."""
    from mbb.params import read_params

    cond = read_params({})
    assert cond.time.model is None
    with pytest.raises(ValueError, match=r"time\.model is not resolved"):
        ex.explain(cond)
    assert load_params({}).time.model == "virtual"  # scripted workers
    llm: dict[str, Any] = {
        "workers": {"negotiator": "llm", "model": "m"},
        "models": {"m": {"model": "m"}},
    }
    assert load_params(llm).time.model == "charged"  # an LLM worker: the paper's clock
    assert load_params({**llm, "time": {"model": "virtual"}}).time.model == "virtual"  # chosen


def seen_in_seeds(cond: Any, seeds: tuple[int, ...] = (0, 1)) -> dict[str, Any]:
    """`observed` over several seeds: a phase ran if it ran in any of them."""
    merged: dict[str, Any] = {}
    for seed in seeds:
        for key, value in observed(run(cond, seed).events).items():
            merged[key] = merged[key] | value if key in merged else value
    return merged


def test_the_switches_are_exercised() -> None:
    """The scripted runs above really show each phase, so the equalities are not vacuous."""
    base = seen_in_seeds(scripted("negotiated", {}), tuple(range(5)))  # revisions are rare
    assert base["declaration"] and base["conversation"] and base["ballot"]
    assert base["revision"] and base["reasoning_published"] and base["negotiator_withdrew"]
    assert base["payment_rules"] == {"pay_your_bid"} and "report" in base["scratch_kinds"]
    refused = seen_in_seeds(scripted("negotiated", SWITCH_VALUES["withdrawal_forbidden"]))
    assert refused["withdrawal_refused"] and not refused["negotiator_withdrew"]
    fixed = seen_in_seeds(scripted("negotiated", SWITCH_VALUES["bids_fixed"]))
    assert fixed["conversation"] and not fixed["revision"]


def test_second_price_and_no_conversation_lose_the_wrong_sentences() -> None:
    """The issue's two cases: under second_price agents were told the order is Kemeny, that
    each holder pays its own bid, and about a conversation and ballots; with the conversation
    off, about a conversation of up to 3 turns."""
    text = ex.render(ex.explain(scripted("second_price", {}))).lower()
    for wrong in ("kemeny", "each holder pays its own bid", "conversation", "ballot", "turns"):
        assert wrong not in text
    assert "highest losing bid" in text and "sealed" in text
    text = ex.render(ex.explain(scripted("negotiated", SWITCH_VALUES["conversation_off"])))
    assert "conversation" not in text.lower() and "up to 3 turns" not in text
    assert "revise" not in text and "public posts" not in text


def test_no_negotiation_is_claimed_where_there_is_none_and_memory_off_is_said() -> None:
    """Under a centralized mechanism without bids (fcfs) the negotiator is asked for nothing,
    yet read "You negotiate for your solver's windows"; under memory off it was not told that
    no condensed history carries over (only what did was ever said)."""
    text = ex.render(ex.explain(scripted("fcfs", {})))
    assert "negotiate on behalf" not in text and "You negotiate for" not in text
    assert "The operator assigns the windows by the rule below; you take no part in it." in text
    text = ex.render(ex.explain(scripted("negotiated", {})))
    assert "You negotiate for your solver's windows, paying for them from" in text
    assert "No notes carry over" not in text
    off = ex.render(ex.explain(scripted("negotiated", {"memory": {"enabled": False}})))
    assert (
        "No notes carry over to your next subruns: neither your condensed history of your "
        "negotiations nor any note your solver saves." in off
    )
    assert "Your worker's notes carry over" not in off


def test_the_memory_rules_say_what_carries_over_and_whose_it_is() -> None:
    """F-16: a worker's scratch is shared by its negotiator and its solver, but the negotiator
    was told only that its condensed history carries over, and neither agent that the other's
    notes and reports are shown to it (now each tagged with whose it is)."""
    on = ex.render(ex.explain(scripted("negotiated", {})))
    assert (
        "Your worker's notes carry over to your next subruns: your condensed history of your "
        "negotiations, and any note your solver saves. Each is tagged with whose it is." in on
    )
    assert (
        "At the end of a subrun you write an after-action report; you read it in your next "
        "subruns, with any report your solver writes, each tagged with whose it is." in on
    )
    solver = ex.render(ex.explain_solver(scripted("negotiated", {}), 4))
    assert "Your negotiator's notes are shown with them, each tagged with whose it is." in solver
    assert "you and your negotiator each write an after-action report; you read both" in solver


def test_an_unknown_rule_is_one_line_listing_the_valid_ones() -> None:
    from mbb.params import ParamsError

    with pytest.raises(ParamsError) as err:
        load_params({"mechanism": {"kind": "lottery"}})
    message = str(err.value)
    assert "\n" not in message
    assert all(name in message for name in MECHANISMS.names())


# --- LLM negotiators through the loopback server -------------------------------------------------
LLM_CASES = [
    (kind, switch)
    for kind in MECHANISMS.names()
    for switch in ("defaults", "conversation_off", "withdrawal_forbidden", "reasoning_secret")
    if switch == "defaults" or kind == "negotiated" or kind == "second_price"
]


@pytest.fixture(scope="module")
def llm_server():
    with FakeOpenAIServer(declaring_responder, models=("m",)) as srv:
        yield srv


def llm_condition(server: FakeOpenAIServer, tmp_path: Any, kind: str, switch: str) -> Any:
    over: dict[str, Any] = {
        "name": f"explain_{kind}_{switch}",
        "subruns": 1,
        "deadline": {"minutes": 8},
        "workers": {"count": 3, "negotiator": "llm", "model": "m"},
        "models": {
            "m": {
                "model": "m",
                "base_url": server.url,
                "api_key_env": None,
                "structured": "json_object_schema",
                "tool_protocol": "json_action",
                "timeout_s": 5.0,
                "max_retries": 0,
                "concurrency": 3,
            }
        },
        "llm": {"cache": "off", "cache_file": str(tmp_path / "cache.sqlite")},
        "mechanism": {"kind": kind},
    }
    for key, value in SWITCH_VALUES[switch].items():
        over[key] = {**over.get(key, {}), **value}
    return load_params(over)


@pytest.mark.parametrize(("kind", "switch"), LLM_CASES)
def test_explanation_matches_the_events_llm(llm_server, tmp_path, kind, switch) -> None:
    cond = llm_condition(llm_server, tmp_path, kind, switch)
    before = len(llm_server.completions)
    result = run_condition(cond, 0)
    events = [json.loads(x) for x in result.log.lines]
    asked = {e["phase"] for e in events if e["kind"] == "llm_call" and e["role"] == "negotiator"}
    plan = ex.plan_of(cond)
    assert asked == set(plan.phases), (asked, plan.phases)
    sections = ex.explain(cond, llm_solvers=llm_solvers(cond))  # its solvers say its clock
    tags = {s.tag for s in sections}
    assert {p for p in (ex.DECLARATION, ex.CONVERSATION, ex.BALLOT) if p in tags} == asked
    seen = observed(events)
    seen["conversation"] |= "conversation" in asked  # a phase that ran, even if all passed
    check(sections, seen, cond)
    systems = {
        r.body["messages"][0]["content"]
        for r in llm_server.completions[before:]
        if r.body["messages"][0]["role"] == "system"
        and "Phase:" in r.body["messages"][-1]["content"]
    }
    # one system prompt per worker, the same up to the worker's identity at its end
    assert len(systems) == (3 if asked else 0)
    assert len({x.rsplit("\nYou are worker", 1)[0] for x in systems}) == (1 if asked else 0)
    for system in systems:
        assert ex.render(sections) in system  # the rules agents read are the explanation
        lowered = system.lower()
        if "conversation" not in asked:
            assert "conversation" not in lowered and "3 turns" not in system
        if "ballot" not in asked:
            assert "ballot" not in lowered and "kemeny" not in lowered
        if kind == "second_price":
            assert "each holder pays its own bid" not in lowered
        if switch == "withdrawal_forbidden":
            assert "withdraw" not in lowered


# --- LLM solvers on real tasks, under each time model ----------------------------------------
THINK_S = 1.5  # every scripted reply takes this long on the fake clock


def solver_condition(root: Any, url: str, tmp_path: Any, clock: str, change: str) -> Any:
    from tests.llm.conftest import KEY_ENV

    over: dict[str, Any] = {
        "name": f"explain_solver_{clock}_{change}",
        "subruns": 1,
        "deadline": {"minutes": 6},
        "workers": {"count": 2},
        "tasks": {"suite": ["rev", "tac"]},
        "models": {
            "local": {
                "model": "m",
                "base_url": url,
                "api_key_env": KEY_ENV,
                "timeout_s": 5.0,
                "max_retries": 1,
                "structured": "json_object_schema",
                "concurrency": 2,
            }
        },
        "llm": {"cache": "off", "cache_file": str(tmp_path / "cache.sqlite")},
        "time": {"model": clock},
        **SWITCH_VALUES[change],
    }
    return load_params(root / "params" / "llm_solvers.yaml", over)


@pytest.mark.parametrize(
    ("clock", "change"),
    [
        ("virtual", "defaults"),
        ("measured", "defaults"),
        ("charged", "defaults"),
        ("charged", "memory_off"),
    ],
)
def test_solver_explanation_matches_the_events_llm(root, tmp_path, monkeypatch, clock, change):
    import asyncio
    from collections import defaultdict

    from mbb.batch.build import run_condition_async
    from mbb.llm.cache import LlmCache
    from mbb.resource.resource import ToolCosts
    from mbb.tasks.harness import CLAIMS_PER_WINDOW, claim_cost_s
    from tests.llm.conftest import KEY_ENV, SECRET, FakeClock, make_client
    from tests.llm.solver_model import SolverScript

    monkeypatch.setenv(KEY_ENV, SECRET)
    fake = FakeClock()
    script = SolverScript(claim_early=True)  # a claim the tests reject, then the work

    async def go(cond: Any) -> Any:
        cache = LlmCache(None, "off")
        client = make_client(clock=fake)
        try:
            return await run_condition_async(cond, 0, tmp_path / "out", llm=(client, cache))
        finally:
            await client.aclose()

    with FakeOpenAIServer(fake.answering(THINK_S, script), api_key=SECRET, models=("m",)) as srv:
        cond = solver_condition(root, srv.url, tmp_path, clock, change)
        result = asyncio.run(go(cond))
        systems = {
            r.body["messages"][0]["content"]
            for r in srv.completions
            if r.body["messages"][0]["content"].startswith("You are the solver of worker")
        }
    events = [json.loads(x) for x in result.log.lines]
    sections = ex.explain_solver(cond, 1)
    # the rules the solvers read are the explanation, and the negotiators' clock is the same
    assert systems and all(ex.render(sections) in x for x in systems)
    assert {s.tag: s.rule for s in sections}[ex.CLOCK] == f"time model:{clock}"
    of = lambda kind: [e for e in events if e["kind"] == kind]  # noqa: E731
    costs = ToolCosts()
    # the commands of windows (the evaluation after the subrun compiles on the operator's side)
    commands = [c for c in of("command") if c["reason"] != "evaluation"]
    ran = [c for c in commands if not c["refused"] and not c["killed"]]
    windows = of("window_ended")
    assert ran and windows
    # "at most 1 claim per window is checked", and a claim costs what the clock says
    claims = [c for c in ran if c["tool"] == "claim"]
    assert claims
    per_window: dict[tuple[str, float], int] = defaultdict(int)
    for c in claims:
        w = next(
            w
            for w in windows
            if w["worker"] == c["worker"] and w["start"] < c["t"] <= w["start"] + w["used"] + 1e-9
        )
        per_window[(w["worker"], w["start"])] += 1
    assert max(per_window.values()) <= CLAIMS_PER_WINDOW
    modeled = {
        c["runtime"] == (claim_cost_s(costs) if c["tool"] == "claim" else costs.of(c["tool"]))
        for c in ran
    }
    # "each tool call costs a fixed number of seconds" (virtual, charged) / "its real running
    # time" (measured)
    assert modeled == ({True} if clock != "measured" else {False})
    # what a window used: its commands, plus the solver's model time under charged
    work = [c for c in of("llm_call") if c["role"] == "solver" and c["phase"] == "work"]
    for w in windows:
        inside = [
            c
            for c in commands
            if c["worker"] == w["worker"] and w["start"] < c["t"] <= w["start"] + w["used"] + 1e-9
        ]
        spent = sum(c["runtime"] for c in inside)
        if clock == "charged":
            calls = [c for c in work if c["worker"] == w["worker"] and c["round"] == w["round"]]
            spent += THINK_S * len(calls)
        assert w["used"] == pytest.approx(min(spent, w["allocation"]), abs=1e-6)
        assert w["reason"] in ("allocation", "released", "completed", "deadline")
    # "outside a window it counts against your deadline" (charged only)
    thinking = of("thinking_charged")
    if clock == "charged":
        planning = [c for c in of("llm_call") if c["role"] == "solver" and c["phase"] == "request"]
        assert thinking and sum(e["seconds"] for e in thinking) == pytest.approx(
            THINK_S * len(planning)
        )
        spec = {w["id"]: w["deadline_s"] for w in of("run_started")[0]["workers"]}
        for e in thinking:
            charged = sum(
                x["seconds"]
                for x in thinking
                if x["worker"] == e["worker"] and x["seq"] <= e["seq"]
            )
            assert e["deadline_s"] == pytest.approx(spec[e["worker"]] - charged)
    else:
        assert not thinking
    # memory: "notes you save are kept" / "memory is off: `memory` saves nothing (recorded)"
    notes = [e for e in of("scratch_written") if e["entry"] == "note"]
    assert notes and all(n["accepted"] == cond.memory.enabled for n in notes)


def test_the_stated_rules_are_the_ones_that_run() -> None:
    """An audit's finds, each a sentence that said something the code does not do: a condition
    that charges nothing told agents they pay from their budget, that credits buy windows and
    that bids 'only signal priority'; next_price said 'the next-highest bid' (it is the next
    holder's bid, capped at one's own, and the last pays nothing); sealed bids were said to be
    seen by no one though the published schedule shows them; a 0 s window, the median of an
    even number of ballots, the tie-break's direction and a terminated holder's payment were
    not said at all; a default ballot published '(default ballot: bid order ...)' as the
    worker's own reasoning."""
    from mbb.protocol.scheduling import payment
    from mbb.protocol.scheduling.validation import default_ballot

    free = ex.render(ex.explain(scripted("negotiated", SWITCH_VALUES["payment_none"])))
    assert "No credits are charged in this condition." in free
    for wrong in ("paying for them", "Credits buy", "signal", "pays nothing for it."):
        assert wrong not in free
    paid = ex.render(ex.explain(scripted("negotiated", SWITCH_VALUES["next_price"])))
    assert (
        "pays the bid of the holder scheduled right after it, but never more than its own" in paid
    )
    assert payment.next_price(["a", "b", "c"], {"a": 50, "b": 80, "c": 10}) == {
        "a": 50,  # capped at its own bid
        "b": 10,  # the next holder's bid
        "c": 0,  # the last holder
    }
    assert "A worker terminated before its window begins pays nothing for it." in paid
    assert "A window allocated 0 s does not run" in paid
    assert "ties are broken by bid (higher first)" in paid
    assert "the lower of the two middle ones" in paid
    for kind in ("first_price", "proportional_share"):
        sealed = ex.render(ex.explain(scripted(kind, {})))
        assert "no one else sees before the" in sealed and "shows" in sealed
    for clock, cut in (("measured", "is killed"), ("virtual", "is not started")):
        assert cut in ex.render(ex.explain(scripted("negotiated", {}, clock)))
    ballot = default_ballot(["W2", "W1"], {"W1": 60, "W2": 90})
    assert "bid order" not in ballot.reasoning and "no ballot received" in ballot.reasoning


def test_privacy_says_who_sees_what_and_offers_no_disclosure() -> None:
    """F-3: "unless you disclose them" put disclosure on the table as a move, and under a sealed
    mechanism there is no channel to disclose anything in."""
    for kind in ("negotiated", "first_price", "second_price", "proportional_share"):
        text = ex.render(ex.explain(scripted(kind, {})))
        assert "disclose" not in text, kind
        assert "Privacy: your budget and your deadline are shown to no other worker." in text
    sealed = ex.render(ex.explain(scripted("first_price", {})))
    assert "Schedules are seen by everyone." in sealed


def test_the_solver_is_told_of_messages_only_where_negotiators_converse() -> None:
    """F-11: the solver's account of a negotiated round named a conversation that does not run
    under conversation_off."""
    on = ex.render(ex.explain_solver(scripted("negotiated", {}), 4))
    assert "may message each other" in on
    for switch in ("conversation_off", "no_turns"):
        off = ex.render(ex.explain_solver(scripted("negotiated", SWITCH_VALUES[switch]), 4))
        assert "message" not in off, switch
        assert "declare bids and durations, and each submits a ballot" in off


def test_the_charged_clock_says_whose_time_moves_it() -> None:
    """F-4: "your deadline clock runs while your solver works" said the opposite of the waiting
    sentence after it; the run's clock moves with any window, and model time is said only of
    language-model solvers, and of the reader's own only where every solver is one."""
    cond = scripted("negotiated", {}, "charged")

    def clock(llm_solvers: bool | None) -> str:
        return next(s.text for s in ex.explain(cond, llm_solvers=llm_solvers) if s.tag == ex.CLOCK)

    for text in (clock(False), clock(True), clock(None)):
        assert text.startswith(
            "How time works: the run's clock runs only while some window is executing, by the "
            "modeled cost of its solver's commands"
        )
        assert "while your solver works" not in text and "Negotiation pauses the clock." in text
    assert "language model" not in clock(False)
    assert "Your solver is a language model" in clock(True)
    assert "where that solver is a language model" in clock(None)
    assert "Your solver is" not in clock(None)


def test_the_negotiators_clock_is_the_one_for_their_solvers() -> None:
    """F-4: the prompt an LLM negotiator reads picks the sentence from the condition's solvers."""
    from mbb.analysis import condition_instructions

    models = {"m": {"model": "m"}}
    modeled = load_params({"workers": {"negotiator": "llm", "model": "m"}, "models": models})
    assert llm_solvers(modeled) is False
    text = condition_instructions(modeled)
    assert "by the modeled cost of its solver's commands. Negotiation pauses" in text
    assert "language model" not in text
    both = {"workers": {"negotiator": "llm", "solver": "llm", "model": "m"}, "models": models}
    llm = load_params({**both, "tasks": {"kind": "real"}})
    assert llm_solvers(llm) is True
    assert "Your solver is a language model" in condition_instructions(llm)
    mixed = {
        **both,
        "tasks": {"kind": "real"},
        "workers": {**both["workers"], "overrides": {"W1": {"solver": "oracle"}}},
    }
    assert llm_solvers(load_params(mixed)) is None


def test_the_solver_is_told_its_default_request() -> None:
    """F-5: the request made for an LLM solver that makes none is a stated rule."""
    cond = scripted("negotiated", {"llm": {"solver": {"planning_turns": 3}}}, "charged")
    text = ex.render(ex.explain_solver(cond, 4))
    assert "You have 3 turn(s) outside a window to call `request` or `withdraw`" in text
    assert "a request of your last requested length this subrun (300 s if none yet)" in text

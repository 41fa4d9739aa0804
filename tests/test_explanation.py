"""The explanation agents read, checked against what the same condition does.

For every mechanism x every switch value the explanation (`mbb.protocol.explain`) is rendered
and the same condition is run; its sections (each tagged with the phase or topic it describes
and the registered rule it comes from) must match the events: every phase that runs is
described, no phase that does not run is mentioned, and the payment and aggregation rules
described are the ones the schedules and payments record. LLM negotiators are run against the
loopback test server, so their full system prompt and the phases they are asked for are checked
too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import condition, run

from mbb.batch.build import load_params, run_condition
from mbb.protocol import explain as ex
from mbb.protocol.rules import MECHANISMS
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


def scripted(kind: str, change: dict[str, Any]) -> Any:
    base: dict[str, Any] = {
        "subruns": 2,
        "deadline": {"minutes": 12},
        "workers": {
            "count": 5,
            "personas": PERSONAS,
            "overrides": {"W5": {"deadline_min": 5}},  # the quitter runs short and withdraws
        },
        "mechanism": {"kind": kind},
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


@pytest.mark.parametrize("kind", MECHANISMS.names())
@pytest.mark.parametrize("switch", list(SWITCH_VALUES))
def test_explanation_matches_the_events_scripted(kind: str, switch: str) -> None:
    cond = scripted(kind, SWITCH_VALUES[switch])
    check(ex.explain(cond), seen_in_seeds(cond), cond)


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
    sections = ex.explain(cond)
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

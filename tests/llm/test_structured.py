"""Schema-constrained actions: request shapes per mode, one repair round-trip, stated default."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mbb.agents.negotiator import LlmNegotiator
from mbb.core.actions import Declaration, Withdraw
from mbb.llm.structured import InvalidOutput, extract_json
from mbb.testing.testserver import Reply

from .conftest import make_client, make_config
from .views import GOOD, make_view

DECL = json.dumps(GOOD["declaration"])


def negotiator(server, sleeps, log, **cfg):
    return LlmNegotiator(
        "W1", config=make_config(server, **cfg), llm=make_client(sleeps), emit=log.emit
    )


def events(log, kind):
    return [json.loads(x) for x in log.by_kind[kind]]


def test_extract_json_from_prose_and_fences() -> None:
    assert extract_json('Sure! ```json\n{"a": {"b": 1}}\n``` done') == {"a": {"b": 1}}
    assert extract_json('{"x": 1}') == {"x": 1}
    assert extract_json('bad {oops} then {"y": 2}') == {"y": 2}
    with pytest.raises(InvalidOutput):
        extract_json("no json here")


def test_json_nested_deeper_than_the_parser_recurses_is_an_invalid_answer() -> None:
    # a RecursionError is not a ValueError: it escaped every reader of answers, and the run
    # applied a default without counting the call as failed or repaired
    from mbb.llm.structured import load_json

    with pytest.raises(json.JSONDecodeError, match="nested too deeply"):
        load_json("[" * 10_000 + "]" * 10_000)
    with pytest.raises(InvalidOutput):
        extract_json("[" * 10_000 + "]" * 10_000)
    with pytest.raises(InvalidOutput, match="nested too deeply"):
        extract_json("Here: " + '{"a": ' * 10_000 + "1" + "}" * 10_000)


@pytest.mark.parametrize(
    ("mode", "check"),
    [
        ("json_schema", lambda b: b["response_format"]["type"] == "json_schema"),
        (
            "json_object_schema",
            lambda b: (
                b["response_format"]["type"] == "json_object"
                and b["response_format"]["schema"]["required"]
            ),
        ),
        ("prompt_only", lambda b: "response_format" not in b and "JSON Schema" in str(b)),
    ],
)
def test_request_shape_per_structured_mode(server, sleeps, log, mode, check) -> None:
    reply = DECL if mode != "prompt_only" else f"Here you go:\n```json\n{DECL}\n```"
    server.push(Reply.completion(reply))
    action = asyncio.run(negotiator(server, sleeps, log, structured=mode).declare(make_view()))
    assert action == Declaration(bid=50, duration=120, position=1, note="hi")
    assert check(server.completions[0].body)


def test_native_tool_protocol(server, sleeps, log) -> None:
    server.push(Reply.tool_call("declaration", DECL))
    action = asyncio.run(
        negotiator(server, sleeps, log, tool_protocol="native").declare(make_view())
    )
    assert isinstance(action, Declaration) and action.bid == 50
    body = server.completions[0].body
    assert body["tool_choice"]["function"]["name"] == "declaration"
    assert body["tools"][0]["function"]["parameters"]["additionalProperties"] is False


def test_schema_violation_repaired_in_one_round_trip(server, sleeps, log) -> None:
    server.push(Reply.json({"action": "declare", "bid": "lots"}), Reply.completion(DECL))
    action = asyncio.run(negotiator(server, sleeps, log).declare(make_view()))
    assert isinstance(action, Declaration) and action.bid == 50
    calls = events(log, "llm_call")
    assert [c["repair"] for c in calls] == [False, True]
    repair_body = server.completions[1].body
    assert repair_body["messages"][-2]["role"] == "assistant"
    assert "bid" in repair_body["messages"][-1]["content"]  # the validation error is sent back
    assert not log.by_kind["invalid_action"]


def test_cut_off_answer_is_repaired_with_the_reason(server, sleeps, log) -> None:
    cut = '{"action": "declare", "bid": 50, "duration": 60, "position": 1, "note": "I need'
    server.push(Reply.completion(cut, finish_reason="length"), Reply.completion(DECL))
    action = asyncio.run(negotiator(server, sleeps, log).declare(make_view()))
    assert isinstance(action, Declaration) and action.bid == 50
    assert "cut off at the token limit" in server.completions[1].body["messages"][-1]["content"]


def test_context_violation_repaired(server, sleeps, log) -> None:
    over = dict(GOOD["declaration"], bid=5000)  # budget is 700
    server.push(Reply.json(over), Reply.completion(DECL))
    action = asyncio.run(negotiator(server, sleeps, log).declare(make_view()))
    assert action.bid == 50
    assert "0..700 (budget)" in server.completions[1].body["messages"][-1]["content"]


def test_still_invalid_after_repair_falls_back_to_default(server, sleeps, log) -> None:
    server.push(Reply.completion("not json"), Reply.json({"bid": 1}))
    view = make_view()
    action = asyncio.run(negotiator(server, sleeps, log).declare(view))
    assert action == Declaration(bid=0, duration=120, position=3, note="")
    (inv,) = events(log, "invalid_action")
    assert inv["rule"] == "default" and inv["phase"] == "declaration"
    assert inv["worker"] == "W1" and inv["subrun"] == 1 and inv["round"] == 2
    assert "bid 0" in inv["detail"]
    assert [c["repair"] for c in events(log, "llm_call")] == [False, True]


def test_refusal_then_default(server, sleeps, log) -> None:
    server.push(Reply.refused("no"), Reply.refused("still no"))
    action = asyncio.run(negotiator(server, sleeps, log).declare(make_view()))
    assert action.bid == 0
    (inv,) = events(log, "invalid_action")
    assert inv["field"] == "refusal" and "refused" in inv["detail"]


def test_a_content_filtered_answer_is_not_taken(server, sleeps, log) -> None:
    """A red team's endpoint marked valid answers `finish_reason: content_filter`: they were
    taken, the run counted valid, and nothing said so. What a filter leaves may be cut or
    replaced: the answer is repaired (and defaulted if the filter stops the repair too)."""
    filtered = Reply.completion(DECL, finish_reason="content_filter")
    server.push(filtered, Reply.completion(DECL, finish_reason="content_filter"))
    action = asyncio.run(negotiator(server, sleeps, log).declare(make_view()))
    assert action.bid == 0  # the default
    (inv,) = events(log, "invalid_action")
    assert "content filter" in inv["detail"]
    assert [c["repair"] for c in events(log, "llm_call")] == [False, True]


def test_bad_tool_arguments_repaired(server, sleeps, log) -> None:
    server.push(Reply.tool_call("declaration", '{"bid": 5,'), Reply.tool_call("declaration", DECL))
    action = asyncio.run(
        negotiator(server, sleeps, log, tool_protocol="native").declare(make_view())
    )
    assert action.bid == 50
    assert len(server.completions) == 2


def test_unavailable_endpoint_defaults_and_is_recorded(server, sleeps, log) -> None:
    server.push(Reply.error(503), Reply.error(503))
    action = asyncio.run(negotiator(server, sleeps, log, max_retries=1).declare(make_view()))
    assert action.bid == 0
    (inv,) = events(log, "invalid_action")
    assert inv["field"] == "llm" and "after 2 attempt" in inv["detail"]
    assert events(log, "llm_call")[0]["error"]


def test_withdraw(server, sleeps, log) -> None:
    server.push(Reply.json(dict(GOOD["declaration"], action="withdraw", note="hopeless")))
    action = asyncio.run(negotiator(server, sleeps, log).declare(make_view()))
    assert action == Withdraw(reason="hopeless")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3)
    ),
    max_leaves=10,
)


@given(
    obj=st.dictionaries(st.text(max_size=5), json_values, max_size=4),
    prefix=st.text(alphabet=st.characters(blacklist_characters="{"), max_size=20),
    suffix=st.text(max_size=20),
)
def test_extract_json_finds_the_first_object(obj, prefix, suffix) -> None:
    assert extract_json(prefix + " " + json.dumps(obj) + "\n" + suffix) == obj

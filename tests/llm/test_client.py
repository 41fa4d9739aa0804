"""Transport faults through the real `openai` client against the local scripted server."""

from __future__ import annotations

import asyncio
import json

import pytest

from mbb.core.errors import EndpointDown
from mbb.llm.cache import CacheMiss, LlmCache
from mbb.llm.client import (
    CallMeta,
    ChatRequest,
    LlmUnavailable,
    request_body,
)
from mbb.testing.testserver import FakeOpenAIServer, Reply

from .conftest import KEY_ENV, SECRET, make_client, make_config

REQ = ChatRequest(messages=[{"role": "user", "content": "hello"}])
META = CallMeta(worker="W1", role="negotiator", phase="declaration", subrun=0, round=2)


def llm_calls(log):
    return [json.loads(line) for line in log.by_kind["llm_call"]]


def test_ok_parses_usage_and_emits_event(server, sleeps, log) -> None:
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 500,
        "total_tokens": 1500,
        "completion_tokens_details": {"reasoning_tokens": 200},
        "prompt_tokens_details": {"cached_tokens": 300},
    }
    server.push(Reply.completion("hi there", usage=usage))
    client = make_client(sleeps)
    res = asyncio.run(client.call(make_config(server), REQ, meta=META, emit=log.emit))
    assert res.text == "hi there"
    assert (res.usage.prompt, res.usage.completion) == (1000, 500)
    assert (res.usage.reasoning, res.usage.cached) == (200, 300)
    assert res.attempts == 1 and not res.cache_hit
    (ev,) = llm_calls(log)
    assert ev["worker"] == "W1" and ev["subrun"] == 0 and ev["round"] == 2
    assert ev["role"] == "negotiator" and ev["phase"] == "declaration"
    assert ev["reasoning_tokens"] == 200 and ev["cached_tokens"] == 300
    assert ev["cost_usd"] == pytest.approx((1000 * 1.0 + 500 * 2.0) / 1e6)
    assert ev["error"] is None
    assert server.completions[0].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in "\n".join(log.lines)


def test_more_cached_tokens_than_the_prompt_has_are_the_whole_prompt(server, sleeps) -> None:
    """1e9 cached tokens of a 50-token prompt read as a 36,665,186 % cached share (a red
    team's find); the count is the prompt's at most."""
    usage = {
        "prompt_tokens": 50,
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 10**9},
    }
    server.push(Reply.completion("hi", usage=usage))
    res = asyncio.run(make_client(sleeps).call(make_config(server), REQ, meta=META))
    assert (res.usage.prompt, res.usage.cached) == (50, 50)


def test_a_model_the_endpoint_names_differently_is_recorded(server, sleeps, log) -> None:
    """A router or gateway can answer with another model than the one asked for: the event
    records the model the answer named (`served_model`), and nothing when it is the same; a
    hostile name is cut, and one that is not a string is none. The report's spend table
    names it under the model asked for."""
    import polars as pl

    from mbb.batch.runs import spend_table_html
    from mbb.core.tables import tables_from_log

    server.push(
        Reply.completion("same"),  # the test server answers as the model asked for
        Reply.completion("routed", model="cheaper-model-2025-01-01"),
        Reply.completion("long", model="x" * 5000),
        Reply.completion("odd", model={"not": "a name"}),  # type: ignore[arg-type]
    )
    client = make_client(sleeps)
    for _ in range(4):
        asyncio.run(client.call(make_config(server), REQ, meta=META, emit=log.emit))
    served = [ev["served_model"] for ev in llm_calls(log)]
    assert served == [None, "cheaper-model-2025-01-01", "x" * 200, None]
    calls = tables_from_log(log)["llm_calls"]
    assert calls["served_model"].to_list() == served
    page = spend_table_html(calls.with_columns(pl.lit("base").alias("condition")))
    assert "answered as cheaper-model-2025-01-01, " in page and "x" * 201 not in page


def test_an_unpriced_model_costs_unknown_never_zero(server, sleeps, log) -> None:
    server.models = ("other",)
    server.push(Reply.completion("x"))
    res = asyncio.run(
        make_client(sleeps).call(make_config(server, model="other"), REQ, meta=META, emit=log.emit)
    )
    assert res.text == "x"
    assert llm_calls(log)[0]["cost_usd"] is None  # unknown (recorded as null), never $0


def test_an_answer_without_usage_is_unknown_never_zero(server, sleeps, log) -> None:
    """An endpoint that sends no `usage` (or one without a prompt or completion count): the
    counts are unknown, so the event records them null and the cost null, never 0."""
    bare = Reply.completion("no counts")
    del bare.body["usage"]
    partial = Reply.completion("only a total", usage={"total_tokens": 15})
    server.push(bare, partial, Reply.completion("counted"))
    client = make_client(sleeps)
    results = [
        asyncio.run(client.call(make_config(server), REQ, meta=META, emit=log.emit))
        for _ in range(3)
    ]
    assert [r.usage.reported for r in results] == [False, False, True]
    events = llm_calls(log)
    for ev in events[:2]:
        assert ev["prompt_tokens"] is None and ev["completion_tokens"] is None, ev
        assert ev["cost_usd"] is None and ev["error"] is None, ev
    assert events[2]["prompt_tokens"] == 10 and events[2]["cost_usd"] is not None


def test_429_honours_retry_after(server, sleeps, log) -> None:
    server.push(Reply.error(429, "slow down", retry_after=7), Reply.completion("ok"))
    res = asyncio.run(make_client(sleeps).call(make_config(server), REQ, meta=META, emit=log.emit))
    assert res.text == "ok" and res.attempts == 2
    assert sleeps.delays == [7.0]
    assert llm_calls(log)[0]["attempts"] == 2
    assert len(server.completions) == 2


def test_a_retry_after_longer_than_mbb_waits_fails_the_call_at_once(server, sleeps, log) -> None:
    """A red team's 429 with `Retry-After: 100000` held `mbb study` silent for ten minutes
    (the wait was capped at 600 s, per attempt). Past MAX_RETRY_AFTER_S the call fails at once,
    saying why; its usage is unknown (null, never 0)."""
    from mbb.core.errors import LlmUnavailable
    from mbb.llm.wrappers import MAX_RETRY_AFTER_S

    server.push(Reply.error(429, "slow down", retry_after=100_000))
    with pytest.raises(LlmUnavailable, match=r"asks to wait 100,000 s before a retry"):
        asyncio.run(make_client(sleeps).call(make_config(server), REQ, meta=META, emit=log.emit))
    assert sleeps.delays == [] and len(server.completions) == 1
    (ev,) = llm_calls(log)
    assert ev["error"] and ev["attempts"] == 1
    assert ev["prompt_tokens"] is None and ev["completion_tokens"] is None
    assert ev["cost_usd"] is None  # a failed call's cost is unknown, never $0
    server.push(Reply.error(429, retry_after=int(MAX_RETRY_AFTER_S)), Reply.completion("ok"))
    res = asyncio.run(make_client(sleeps).call(make_config(server), REQ, meta=META))
    assert res.text == "ok" and sleeps.delays == [MAX_RETRY_AFTER_S]  # up to the bound: waited


def test_500_retried_with_jittered_exponential_backoff(server, sleeps) -> None:
    server.push(Reply.error(500), Reply.error(503), Reply.error(502), Reply.completion("ok"))
    client = make_client(sleeps, backoff_base_s=1.0, backoff_cap_s=60.0)
    res = asyncio.run(client.call(make_config(server), REQ, meta=META))
    assert res.attempts == 4
    assert len(sleeps.delays) == 3
    for i, d in enumerate(sleeps.delays):
        assert 0 <= d <= 2**i  # full jitter within the exponential envelope


def test_retries_exhausted_is_unavailable_and_recorded(server, sleeps, log) -> None:
    server.push(*[Reply.error(500)] * 3)
    cfg = make_config(server, max_retries=2)
    with pytest.raises(LlmUnavailable, match="after 3 attempt"):
        asyncio.run(make_client(sleeps).call(cfg, REQ, meta=META, emit=log.emit))
    assert len(server.completions) == 3 and len(sleeps.delays) == 2
    (ev,) = llm_calls(log)
    assert "InternalServerError" in ev["error"]
    assert ev["attempts"] == 3 and ev["prompt_tokens"] is None  # unknown, never 0


def test_timeout_then_success(server, sleeps) -> None:
    server.push(Reply.slow(1.0), Reply.completion("ok"))
    cfg = make_config(server, timeout_s=0.2)
    res = asyncio.run(make_client(sleeps).call(cfg, REQ, meta=META))
    assert res.text == "ok" and res.attempts == 2


def test_dropped_connection_then_success(server, sleeps) -> None:
    server.push(Reply.dropped(), Reply.completion("ok"))
    res = asyncio.run(make_client(sleeps).call(make_config(server), REQ, meta=META))
    assert res.text == "ok" and res.attempts == 2


def test_malformed_body_is_retried(server, sleeps) -> None:
    server.push(Reply.malformed(), Reply.completion("ok"))
    res = asyncio.run(make_client(sleeps).call(make_config(server), REQ, meta=META))
    assert res.text == "ok" and res.attempts == 2


def test_an_answer_longer_than_max_tokens_allows_is_malformed_and_retried(server, sleeps) -> None:
    """An endpoint that answers megabytes to a 1,024-token cap is broken or hostile: the
    answer is a failed attempt (its text kept nowhere), retried, and the endpoint's failures
    count as any other's; an answer within the cap passes."""
    from mbb.llm.provider import MIN_ANSWER_CHARS

    huge = "x" * (MIN_ANSWER_CHARS + 1)
    server.push(Reply.completion(huge), Reply.completion("y" * MIN_ANSWER_CHARS))
    res = asyncio.run(make_client(sleeps).call(make_config(server, max_tokens=16), REQ, meta=META))
    assert res.attempts == 2 and len(res.text or "") == MIN_ANSWER_CHARS
    server.push(*[Reply.tool_call("act", "[" * 2_000_000)] * 2)
    with pytest.raises(LlmUnavailable, match="tool_arguments of 2,000,000 characters"):
        asyncio.run(make_client(sleeps).call(make_config(server, max_retries=1), REQ, meta=META))


def test_an_answer_trickled_past_timeout_s_is_a_timeout_though_each_byte_is_quick(
    server, sleeps
) -> None:
    """The HTTP client's timeout bounds each read; an endpoint sending a byte every 0.2 s never
    trips it. The whole call is bounded by timeout_s: a failed attempt, retried, then the
    call is unavailable with one line, instead of a study held for ever."""
    server.push(Reply.trickled(0.2), Reply.trickled(0.2))
    config = make_config(server, timeout_s=1.0, max_retries=1)
    client = make_client(sleeps)
    with pytest.raises(LlmUnavailable, match="no whole answer within timeout_s 1 s"):
        asyncio.run(client.call(config, REQ, meta=META))
    assert len(server.completions) == 2


def test_a_body_nested_deeper_than_the_parser_recurses_is_malformed(server, sleeps) -> None:
    server.push(*[Reply(body="[" * 100_000 + "]" * 100_000)] * 2)
    with pytest.raises(LlmUnavailable, match="MalformedResponse: JSON nested too deeply"):
        asyncio.run(make_client(sleeps).call(make_config(server, max_retries=1), REQ, meta=META))
    assert len(server.completions) == 2


def test_non_object_body_is_retried_then_unavailable(server, sleeps) -> None:
    server.push(Reply(body="[1, 2]"), Reply(body="null"), Reply(body="42"))
    with pytest.raises(LlmUnavailable, match="MalformedResponse"):
        asyncio.run(make_client(sleeps).call(make_config(server, max_retries=2), REQ, meta=META))
    assert len(server.completions) == 3


def test_a_reply_without_choices_or_with_an_error_at_200_is_a_failed_call(server, sleeps) -> None:
    """No choices is no answer, not an empty one, and a gateway's error served with HTTP 200
    ("quota exceeded") is an error: both are retried and then fail the call with the reason,
    so a dead endpoint is not read as one answering "" (a repair per call, runs marked
    invalid, 0 calls failed, as a study against such a gateway once ended)."""
    empty = Reply(body={"id": "x", "object": "chat.completion", "choices": []})
    server.push(empty, empty, Reply.completion("fine"))
    res = asyncio.run(make_client(sleeps).call(make_config(server), REQ, meta=META))
    assert res.text == "fine" and res.attempts == 3
    quota = Reply(body={"error": {"message": "quota exceeded", "type": "insufficient_quota"}})
    vllm = Reply(body={"object": "error", "message": "engine dead", "code": 500})
    for bad, why in ((empty, "no choices in the answer"), (quota, "quota exceeded")):
        server.push(bad, bad, bad)
        with pytest.raises(LlmUnavailable, match=why):
            asyncio.run(
                make_client(sleeps).call(make_config(server, max_retries=2), REQ, meta=META)
            )
    server.push(vllm)
    with pytest.raises(LlmUnavailable, match="an error instead of an answer: engine dead"):
        asyncio.run(make_client(sleeps).call(make_config(server, max_retries=0), REQ, meta=META))


def test_tool_call_id_and_object_arguments(server, sleeps) -> None:
    """The first tool call's id is kept (a tool loop echoes it); arguments some servers send
    as a JSON object rather than a string are read as its JSON text."""
    call = {"id": "call_9", "type": "function", "function": {"name": "bash", "arguments": {}}}
    call["function"]["arguments"] = {"command": "ls"}
    server.push(Reply.completion(None, tool_calls=[call]))
    res = asyncio.run(make_client(sleeps).complete(make_config(server), REQ))
    assert (res.tool_name, res.tool_call_id) == ("bash", "call_9")
    assert json.loads(res.tool_arguments) == {"command": "ls"}


def test_sent_body_is_the_request_body(server, sleeps) -> None:
    cfg = make_config(
        server, temperature=0.3, extra_body={"seed": 7, "temperature": 9.0, "top_k": 20}
    )
    req = ChatRequest(messages=REQ.messages, response_format={"type": "json_object"})
    server.push(Reply.completion("ok"))
    asyncio.run(make_client(sleeps).call(cfg, req, meta=META))
    sent = server.completions[0].body
    assert sent == request_body(cfg, req)
    assert sent["temperature"] == 0.3 and sent["seed"] == 7 and sent["top_k"] == 20


def test_401_stops_the_endpoint_naming_model_url_and_env(server, sleeps, log) -> None:
    """A refused key stops the endpoint's runs at once (resumable): no retry, no default, and
    every later call to that endpoint stops without reaching it."""
    client = make_client(sleeps)
    client.environ = {KEY_ENV: "sk-wrong-key-000"}
    with pytest.raises(EndpointDown) as err:
        asyncio.run(client.call(make_config(server), REQ, meta=META, emit=log.emit))
    msg = str(err.value)
    assert "401" in msg and "test-model" in msg and server.url in msg and KEY_ENV in msg
    assert "sk-wrong-key-000" not in msg
    assert len(server.completions) == 1 and sleeps.delays == []
    assert "sk-wrong-key-000" not in "\n".join(log.lines)
    with pytest.raises(EndpointDown):
        asyncio.run(client.call(make_config(server), REQ, meta=META, emit=log.emit))
    assert len(server.completions) == 1


def test_401_from_a_keyless_endpoint_says_no_key_was_sent(sleeps) -> None:
    """A local server configured without a key (`api_key_env: null`) that turns out to want
    one: the line says the request went without a key, not "environment variable None"."""
    with (
        FakeOpenAIServer(api_key="sk-the-server-wants-this") as guarded,
        pytest.raises(EndpointDown) as err,
    ):
        config = make_config(guarded, api_key_env=None)
        asyncio.run(make_client(sleeps).call(config, REQ, meta=META))
    msg = str(err.value)
    assert "401" in msg and "sent without a key (api_key_env: null)" in msg and "None" not in msg


def test_404_unknown_model_stops_the_endpoint(server, sleeps) -> None:
    with pytest.raises(EndpointDown) as err:
        asyncio.run(make_client(sleeps).call(make_config(server, model="nope"), REQ, meta=META))
    assert "'nope'" in str(err.value) and server.url in str(err.value)
    assert len(server.completions) == 1 and sleeps.delays == []


def test_missing_env_var_names_it(server, sleeps) -> None:
    client = make_client(sleeps)
    client.environ = {}
    with pytest.raises(EndpointDown, match=KEY_ENV):
        asyncio.run(client.call(make_config(server), REQ, meta=META))
    assert server.completions == []


def test_consecutive_failures_stop_the_endpoint_and_a_success_resets_the_count(
    server, sleeps
) -> None:
    client = make_client(sleeps)
    cfg = make_config(server, max_retries=0)
    server.push(Reply.error(500), Reply.error(500), Reply.completion("ok"))
    for _ in range(2):  # below the threshold: the caller gets LlmUnavailable (its default)
        with pytest.raises(LlmUnavailable):
            asyncio.run(client.call(cfg, REQ, meta=META))
    assert asyncio.run(client.call(cfg, REQ, meta=META)).text == "ok"
    server.push(*[Reply.error(500)] * 3)
    for _ in range(2):
        with pytest.raises(LlmUnavailable):
            asyncio.run(client.call(cfg, REQ, meta=META))
    with pytest.raises(EndpointDown, match=r"3 call\(s\) in a row failed; the last: .*500"):
        asyncio.run(client.call(cfg, REQ, meta=META))
    sent = len(server.completions)
    with pytest.raises(EndpointDown):
        asyncio.run(client.call(cfg, REQ, meta=META))
    assert len(server.completions) == sent  # nothing more reaches a stopped endpoint


def test_no_key_config_sends_placeholder(server, sleeps) -> None:
    server.api_key = None
    server.push(Reply.completion("ok"))
    res = asyncio.run(
        make_client(sleeps).call(make_config(server, api_key_env=None), REQ, meta=META)
    )
    assert res.text == "ok"


def test_cache_read_write_then_replay_makes_zero_requests(server, sleeps, tmp_path) -> None:
    path = tmp_path / "cache.sqlite"
    server.push(Reply.completion("first"), Reply.completion("second"))
    reqs = [REQ, ChatRequest(messages=[{"role": "user", "content": "other"}])]

    async def run(mode, log):
        cache = LlmCache(path, mode)
        client = make_client(sleeps)
        out = [await client.call(make_config(server), r, meta=META, emit=log.emit, cache=cache)
               for r in reqs]  # fmt: skip
        cache.close()
        return out

    from mbb.core.eventlog import EventLog

    live_log, replay_log = EventLog("a"), EventLog("b")
    live = asyncio.run(run("read_write", live_log))
    n = len(server.requests)
    replay = asyncio.run(run("replay", replay_log))
    assert len(server.requests) == n == 2
    assert [r.text for r in replay] == [r.text for r in live] == ["first", "second"]
    assert [r.usage for r in replay] == [r.usage for r in live]
    evs = llm_calls(replay_log)
    assert all(e["cache_hit"] for e in evs) and all(e["attempts"] == 0 for e in evs)
    assert not any(e["cache_hit"] for e in llm_calls(live_log))
    blob = path.read_bytes()
    assert SECRET.encode() not in blob


def test_replay_miss_is_a_clear_error_and_needs_no_key(server, sleeps, tmp_path, log) -> None:
    client = make_client(sleeps)
    client.environ = {}  # replay must not even need the key
    cache = LlmCache(tmp_path / "c.sqlite", "replay")
    with pytest.raises(CacheMiss, match=r"replay cache miss.*W1"):
        asyncio.run(client.call(make_config(server), REQ, meta=META, emit=log.emit, cache=cache))
    assert server.requests == []
    assert "replay cache miss" in llm_calls(log)[0]["error"]


def test_a_cache_that_keeps_no_failures_asks_again(server, sleeps, tmp_path) -> None:
    """A run's cache keeps a final failure (its resume replays the same events); the LLM
    classifier's request cache did too, so a 500 once was replayed on every later run without
    a request (a red team's find). With keep_failures=False it is asked again."""
    from mbb.core.errors import LlmUnavailable

    cache = LlmCache(tmp_path / "c.sqlite", "read_write")
    cfg = make_config(server, max_retries=0)

    def call(keep: bool):
        client = make_client(sleeps)
        return asyncio.run(client.call(cfg, REQ, meta=META, cache=cache, keep_failures=keep))

    server.push(Reply.error(500), Reply.completion("ok"))
    with pytest.raises(LlmUnavailable):
        call(False)
    assert call(False).text == "ok" and len(server.completions) == 2  # asked again
    other = ChatRequest(messages=[{"role": "user", "content": "a run's call"}])
    server.push(Reply.error(500))
    client = make_client(sleeps)
    for _ in range(2):  # kept: the second is the replayed failure, no request
        with pytest.raises(LlmUnavailable):
            asyncio.run(client.call(cfg, other, meta=META, cache=cache))
    assert len(server.completions) == 3


def test_cache_key_ignores_endpoint_and_key(server, sleeps, tmp_path) -> None:
    cache = LlmCache(tmp_path / "c.sqlite", "read_write")
    server.push(Reply.completion("ok"))
    asyncio.run(make_client(sleeps).call(make_config(server), REQ, meta=META, cache=cache))
    other = make_config(server, base_url="http://127.0.0.1:9/v1", api_key_env="OTHER_KEY")
    res = asyncio.run(make_client(sleeps).call(other, REQ, meta=META, cache=cache))
    assert res.cache_hit and res.text == "ok" and len(server.requests) == 1


def test_recorded_failure_replays_as_unavailable(server, sleeps, tmp_path) -> None:
    path = tmp_path / "c.sqlite"
    server.push(Reply.error(500), Reply.error(500))
    cfg = make_config(server, max_retries=1)
    with pytest.raises(LlmUnavailable):
        asyncio.run(make_client(sleeps).call(cfg, REQ, meta=META, cache=LlmCache(path)))
    with pytest.raises(LlmUnavailable):
        asyncio.run(make_client(sleeps).call(cfg, REQ, meta=META, cache=LlmCache(path, "replay")))
    # read_write reproduces it too: the same run with the same cache gives the same events
    with pytest.raises(LlmUnavailable):
        asyncio.run(make_client(sleeps).call(cfg, REQ, meta=META, cache=LlmCache(path)))
    assert len(server.completions) == 2


def test_concurrency_limit_per_endpoint(server, sleeps) -> None:
    server.delay_s = 0.1
    cfg = make_config(server, concurrency=2)
    client = make_client(sleeps)

    async def go():
        await asyncio.gather(*(client.call(cfg, REQ, meta=META) for _ in range(5)))

    asyncio.run(go())
    assert server.max_overlap() == 2


def test_two_models_of_one_provider_each_keep_their_own_concurrency(server, sleeps) -> None:
    """Eight models behind one base URL (a provider, a router) are eight endpoints: each has
    its own in-flight limit, not one shared limit sized by whichever came first."""
    server.delay_s = 0.2
    server.models = ("m-a", "m-b")
    a = make_config(server, model="m-a", concurrency=1)
    b = make_config(server, model="m-b", concurrency=1)
    client = make_client(sleeps)

    async def go():
        await asyncio.gather(*(client.call(c, REQ, meta=META) for c in (a, a, b, b)))

    asyncio.run(go())
    assert server.max_overlap() == 2  # one of each model at a time


@pytest.mark.parametrize(
    ("raw", "counts"),
    [
        ({"prompt_tokens": 12, "completion_tokens": 3}, (12, 3)),
        ({"prompt_tokens": "12", "completion_tokens": 3.0}, (12, 3)),  # loose servers
        ({"prompt_tokens": 12}, None),
        ({"prompt_tokens": -1, "completion_tokens": 3}, None),
        ({"prompt_tokens": 10**30, "completion_tokens": 3}, None),  # broke the usage tables
        ({"prompt_tokens": True, "completion_tokens": 3}, None),
        ({"prompt_tokens": 12, "completion_tokens": "many"}, None),
        ({"total_tokens": 15}, None),
        (None, None),
    ],
)
def test_usage_is_reported_only_with_both_counts(raw, counts) -> None:
    from mbb.llm.provider import _usage

    u = _usage(raw)
    assert u.reported == (counts is not None)
    if counts is not None:
        assert (u.prompt, u.completion) == counts


def _gzip(body: dict | str) -> bytes:
    import gzip

    return gzip.compress((body if isinstance(body, str) else json.dumps(body)).encode())


def test_an_answer_body_over_the_cap_is_refused_as_it_arrives(server, sleeps, monkeypatch) -> None:
    """A red team's finds: the client read a whole body before mbb checked it (a 200 MB answer
    took 1.8 GB; an endless one 3 GB in 15 s). The transport counts bytes as they arrive and
    refuses past the cap: a failed attempt, retried, then unavailable with one line."""
    from mbb.llm import transport

    monkeypatch.setattr(transport, "MAX_ANSWER_BYTES", 50_000)
    big = Reply.completion("x" * 60_000)
    server.push(big, Reply.completion("fine"))
    res = asyncio.run(make_client(sleeps).call(make_config(server), REQ, meta=META))
    assert res.text == "fine" and res.attempts == 2
    server.push(big, big)
    with pytest.raises(LlmUnavailable, match="MalformedResponse: an answer over 50,000 bytes"):
        asyncio.run(make_client(sleeps).call(make_config(server, max_retries=1), REQ, meta=META))


def test_a_compressed_answer_is_read_and_a_compression_bomb_refused(
    server, sleeps, monkeypatch
) -> None:
    """gzip is inflated under the cap: 2 MB of gzip that inflates to 2 GB had taken 3 GB;
    an encoding mbb did not ask for is refused, not read raw."""
    from mbb.llm import transport

    monkeypatch.setattr(transport, "MAX_ANSWER_BYTES", 1_000_000)
    ok = Reply.completion("zipped fine")
    server.push(Reply(body=_gzip(ok.body), headers={"Content-Encoding": "gzip"}))
    res = asyncio.run(make_client(sleeps).call(make_config(server), REQ, meta=META))
    assert res.text == "zipped fine"
    bomb = _gzip('{"choices": [' + " " * 20_000_000 + "]}")
    assert len(bomb) < 100_000
    server.push(*[Reply(body=bomb, headers={"Content-Encoding": "gzip"})] * 2)
    with pytest.raises(LlmUnavailable, match="over 1,000,000 bytes once inflated"):
        asyncio.run(make_client(sleeps).call(make_config(server, max_retries=1), REQ, meta=META))
    server.push(*[Reply(body=b"\x00" * 10, headers={"Content-Encoding": "br"})] * 2)
    with pytest.raises(LlmUnavailable, match="an encoding mbb did not ask for"):
        asyncio.run(make_client(sleeps).call(make_config(server, max_retries=1), REQ, meta=META))


def test_a_redirect_is_reported_never_followed(server, sleeps) -> None:
    """A 307 to another endpoint was followed silently: another server answered every call of
    a study naming the first (and could be any URL the first chose)."""
    with FakeOpenAIServer() as other:
        other.push(Reply.completion("from elsewhere"))
        to = f"{other.url}/chat/completions"
        server.push(Reply(status=307, body="", headers={"Location": to}))
        with pytest.raises(
            LlmUnavailable, match=r"redirects to http://127\.0\.0\.1:.*does not follow"
        ):
            asyncio.run(make_client(sleeps).call(make_config(server), REQ, meta=META))
        assert other.completions == []


def test_an_answer_field_no_server_sends_that_long_is_malformed(server, sleeps) -> None:
    """finish_reason, a tool's name and a tool call's id of 1 MB each filled ~300 MB of cache
    in a two-run study, the runs counted valid: fields with a short form are held to it."""
    long_finish = Reply.completion("ok")
    assert isinstance(long_finish.body, dict)
    long_finish.body["choices"][0]["finish_reason"] = "s" * 10_000
    long_id = Reply.tool_call("act", "{}")
    assert isinstance(long_id.body, dict)
    long_id.body["choices"][0]["message"]["tool_calls"][0]["id"] = "i" * 10_000
    long_name = Reply.tool_call("a" * 10_000, "{}")
    for reply, field in ((long_finish, "finish_reason"), (long_id, "tool_call_id"),
                         (long_name, "tool_name")):  # fmt: skip
        server.push(reply, reply)
        with pytest.raises(LlmUnavailable, match=f"{field} of 10,000 characters"):
            asyncio.run(
                make_client(sleeps).call(make_config(server, max_retries=1), REQ, meta=META)
            )


def test_a_proxy_the_environment_names_is_used_and_its_answers_capped(
    server, sleeps, monkeypatch
) -> None:
    """Given mbb's capped transport, the client no longer read the environment's proxy: behind
    one, every call failed to connect. The capped transport uses it, and caps what comes
    through. The loopback server plays the proxy here (it answers the absolute URL a proxy
    receives)."""
    from mbb.llm import transport

    monkeypatch.setattr(transport, "MAX_ANSWER_BYTES", 50_000)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.url.rsplit("/v1", 1)[0])
    big = Reply.completion("x" * 60_000)
    server.push(big, big)
    config = make_config(server, max_retries=1).model_copy(
        update={"base_url": "http://api.example.invalid/v1"}
    )
    with pytest.raises(LlmUnavailable, match="an answer over 50,000 bytes"):
        asyncio.run(make_client(sleeps).call(config, REQ, meta=META))
    assert len(server.completions) == 2  # through the proxy, both attempts
    assert transport.env_proxy("http://api.example.invalid/v1") is not None
    monkeypatch.setenv("NO_PROXY", "api.example.invalid")
    assert transport.env_proxy("http://api.example.invalid/v1") is None

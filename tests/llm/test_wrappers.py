"""The LLM layer's wrappers composed in the orders that matter, through the real `openai` client
against the loopback server; the replay cache's keys against a file written by the previous
client (`fixtures/cache_from_main.sqlite`); connections closed when a run ends."""

from __future__ import annotations

import asyncio
import gc
import json
import shutil
from pathlib import Path

import pytest

from mbb.batch.build import load_params
from mbb.core.errors import BudgetExhausted, LlmUnavailable
from mbb.core.eventlog import EventLog
from mbb.llm.budget import SpendLedger
from mbb.llm.cache import LlmCache
from mbb.llm.client import LlmClient
from mbb.llm.config import ModelConfig
from mbb.llm.provider import Call, OpenAICompatibleProvider
from mbb.llm.types import CallMeta, ChatRequest, LlmResult
from mbb.llm.wrappers import Audited, Budgeted, Cached, ConcurrencyLimit, Pricing, Retrying
from mbb.testing.testserver import FakeOpenAIServer, Reply, schema_responder

from .conftest import KEY_ENV, SECRET, FakeClock, Sleeps, make_client, make_config

FIXTURES = Path(__file__).parent / "fixtures"
META = CallMeta(worker="W1", role="negotiator", phase="declaration", subrun=1, round=1)


def req(text: str) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}])


class Probe:
    """A provider wrapper that records which requests entered it, in order."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.entered: list[str] = []

    async def complete(self, call: Call) -> LlmResult:
        self.entered.append(call.body["messages"][0]["content"])
        return await self.inner.complete(call)

    async def aclose(self) -> None:
        await self.inner.aclose()


class GatedSleep:
    """A backoff sleep that waits until the test opens the gate, and says when it started."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.sleeping = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.sleeping.set()
        await self.gate.wait()


# --- retries ----------------------------------------------------------------------------------
def test_retries_429_and_5xx_and_records_each_error(server, log) -> None:
    server.push(Reply.error(429, retry_after=3), Reply.error(503), Reply.completion("ok"))
    client = make_client()
    res = asyncio.run(client.call(make_config(server), req("hi"), meta=META, emit=log.emit))
    assert res.text == "ok" and res.attempts == 3
    assert res.retried == ("RateLimitError (HTTP 429)", "InternalServerError (HTTP 503)")
    assert client.sleeps[0] == 3.0 and len(client.sleeps) == 2
    (event,) = [json.loads(x) for x in log.by_kind["llm_call"]]
    assert event["attempts"] == 3 and event["error"] is None


def test_without_the_retry_wrapper_a_transient_failure_is_unavailable(server) -> None:
    server.push(Reply.error(500), Reply.completion("never asked"))
    provider = OpenAICompatibleProvider(environ={KEY_ENV: SECRET})
    call = Call.of(make_config(server), req("hi"), META)
    with pytest.raises(LlmUnavailable, match="InternalServerError"):
        asyncio.run(provider.complete(call))
    assert len(server.completions) == 1


# --- ConcurrencyLimit inside or outside Retrying ----------------------------------------------
@pytest.mark.parametrize("limit_inside", [True, False])
def test_a_call_in_backoff_holds_its_slot_only_when_the_limit_is_outside(server, limit_inside):
    """Concurrency 1. A is answered 429 and backs off; meanwhile B is sent. With the limit
    inside the retries (the client's order) B gets the slot while A sleeps; with the limit
    outside, A holds it through its backoff and B waits for A."""
    server.push(Reply.error(429, retry_after=1), Reply.completion("b"), Reply.completion("a"))
    cfg = make_config(server, concurrency=1)

    async def go() -> list[str]:
        sleep = GatedSleep()
        probe = Probe(OpenAICompatibleProvider(environ={KEY_ENV: SECRET}))
        if limit_inside:
            stack = Retrying(ConcurrencyLimit(probe), sleep=sleep)
        else:
            stack = ConcurrencyLimit(Retrying(probe, sleep=sleep))
        a = asyncio.create_task(stack.complete(Call.of(cfg, req("A"), META)))
        await sleep.sleeping.wait()  # A got its 429 and is backing off
        b = asyncio.create_task(stack.complete(Call.of(cfg, req("B"), META)))
        for _ in range(20):  # let B run as far as it can while A sleeps
            await asyncio.sleep(0)
        if limit_inside:
            assert (await b).text == "b"  # answered while A still sleeps
        entered_while_a_slept = list(probe.entered)
        sleep.gate.set()
        results = await asyncio.gather(a, b)
        assert [r.text for r in results] in (["a", "b"], ["b", "a"])
        await stack.aclose()
        return entered_while_a_slept

    entered = asyncio.run(go())
    assert entered == (["A", "B"] if limit_inside else ["A"])


# --- Audited outside or inside Cached ---------------------------------------------------------
@pytest.mark.parametrize("audit_outside", [True, False])
def test_cache_hits_are_audited_only_when_the_audit_is_outside_the_cache(
    server, tmp_path, audit_outside
) -> None:
    server.push(Reply.completion("once"))
    cfg = make_config(server)
    log = EventLog("audit-order")

    async def go() -> list[LlmResult]:
        cache = LlmCache(tmp_path / "c.sqlite", "read_write")
        net = Retrying(ConcurrencyLimit(OpenAICompatibleProvider(environ={KEY_ENV: SECRET})))
        pricing = Pricing()
        if audit_outside:
            stack = Audited(Cached(net, cache), log.emit, pricing)
        else:
            stack = Cached(Audited(net, log.emit, pricing), cache)
        out = [await stack.complete(Call.of(cfg, req("same"), META)) for _ in range(2)]
        await stack.aclose()
        cache.close()
        return out

    first, second = asyncio.run(go())
    assert (first.text, second.text) == ("once", "once") and second.cache_hit
    events = [json.loads(x) for x in log.by_kind["llm_call"]]
    assert [e["cache_hit"] for e in events] == ([False, True] if audit_outside else [False])
    assert len(server.completions) == 1


# --- Budgeted inside or outside Cached --------------------------------------------------------
@pytest.mark.parametrize("budget_inside", [True, False])
def test_a_spent_budget_blocks_cache_hits_only_when_it_is_outside_the_cache(
    server, tmp_path, budget_inside
) -> None:
    server.push(Reply.completion("paid"))  # 15 tokens: the cap of 10 is then reached
    cfg = make_config(server)

    async def go() -> str | None:
        cache = LlmCache(tmp_path / "c.sqlite", "read_write")
        ledger = SpendLedger(max_tokens_total=10)
        net = Retrying(ConcurrencyLimit(OpenAICompatibleProvider(environ={KEY_ENV: SECRET})))
        if budget_inside:
            stack = Cached(Budgeted(net, ledger, Pricing()), cache)
        else:
            stack = Budgeted(Cached(net, cache), ledger, Pricing())
        await stack.complete(Call.of(cfg, req("q"), META))
        try:
            again = await stack.complete(Call.of(cfg, req("q"), META))
        except BudgetExhausted:
            again = None
        with pytest.raises(BudgetExhausted):  # a new question is never sent
            await stack.complete(Call.of(cfg, req("new"), META))
        await stack.aclose()
        cache.close()
        return None if again is None else again.text

    assert asyncio.run(go()) == ("paid" if budget_inside else None)
    assert len(server.completions) == 1


# --- the concurrency limit --------------------------------------------------------------------
def test_the_limit_is_per_endpoint(server) -> None:
    server.delay_s = 0.05
    with FakeOpenAIServer(api_key=SECRET) as other:
        other.delay_s = 0.05
        a, b = make_config(server, concurrency=2), make_config(other, concurrency=1)
        client = make_client()

        async def go() -> None:
            calls = [client.call(a, req(f"a{i}"), meta=META) for i in range(4)]
            calls += [client.call(b, req(f"b{i}"), meta=META) for i in range(3)]
            await asyncio.gather(*calls)
            await client.aclose()

        asyncio.run(go())
        assert server.max_overlap() == 2 and other.max_overlap() == 1


# --- the replay cache's keys are the previous client's ----------------------------------------
def _main_cases(url: str) -> list[tuple[str, ModelConfig, ChatRequest]]:
    """The requests `fixtures/cache_from_main.sqlite` was recorded with, by the client of
    commit 4b05d43 (before the provider/wrappers split)."""
    plain = ModelConfig(
        model="test-model",
        base_url=url,
        api_key_env="K",
        temperature=0.2,
        max_retries=1,
        structured="json_object_schema",
    )
    router = ModelConfig(
        preset="openrouter",
        model="vendor/model-x",
        base_url=url,
        api_key_env="K",
        reasoning_effort="low",
        max_retries=1,
    )
    msgs = [{"role": "system", "content": "You are W1."}, {"role": "user", "content": "Declare."}]
    fmt = {
        "type": "json_object",
        "schema": {"type": "object", "properties": {"bid": {"type": "integer"}}},
    }
    tools = [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "description": "run",
                "parameters": {
                    "type": "object",
                    "properties": {"command": {"type": "string"}},
                    "required": ["command"],
                    "additionalProperties": False,
                },
            },
        }
    ]
    return [
        ("json", plain, ChatRequest(messages=msgs, response_format=fmt)),
        ("tools", plain, ChatRequest(messages=msgs, tools=tools, tool_choice="required")),
        ("preset", router, ChatRequest(messages=[*msgs, {"role": "user", "content": "é ✓"}])),
        ("failure", plain, ChatRequest(messages=[{"role": "user", "content": "fail"}])),
    ]


MAIN_KEYS = {
    "json": "0ed6e5bfa1348200e466a6c58a8633fc016245ef26e249374f3c52e482a2b860",
    "tools": "a37e4c950acd90957a08713ee7c9d3bc92f35b93b7e6cfabe9a29618e90f80cb",
    "preset": "bcc106ce05e95ffdc8697d18b81dae67027a3e8bf4e8bceb1e8532a989dd2a94",
    "failure": "337e15030f58498ff9a89f213949aebf7c93f40c01808758045a357b21e91030",
}


def test_a_cache_written_by_the_previous_client_still_hits(tmp_path, log) -> None:
    path = tmp_path / "cache.sqlite"
    shutil.copy(FIXTURES / "cache_from_main.sqlite", path)  # replay never writes, but opens
    cache = LlmCache(path, "replay")
    client = LlmClient(environ={}, sleep=Sleeps())  # replay needs no key and no server
    cases = _main_cases("http://127.0.0.1:9/v1")
    assert {name: Call.of(cfg, r).key for name, cfg, r in cases} == MAIN_KEYS

    async def go() -> list[object]:
        out: list[object] = []
        for name, cfg, r in cases:
            meta = CallMeta("W1", "negotiator", name)
            try:
                out.append(await client.call(cfg, r, meta=meta, emit=log.emit, cache=cache))
            except LlmUnavailable as exc:
                out.append(exc)
        return out

    json_, tools, preset, failure = asyncio.run(go())
    cache.close()
    assert isinstance(json_, LlmResult) and json_.text == '{"bid": 7}' and json_.cache_hit
    assert isinstance(tools, LlmResult) and tools.tool_name == "bash"
    assert json.loads(tools.tool_arguments or "") == {"command": "ls"}
    assert isinstance(preset, LlmResult) and preset.text == "routed"
    assert isinstance(failure, LlmUnavailable) and "after 2 attempt(s)" in str(failure)
    events = [json.loads(x) for x in log.by_kind["llm_call"]]
    assert [e["cache_hit"] for e in events] == [True] * 4
    assert [e["latency_s"] for e in events] == [0.0] * 4  # recorded before latencies were
    assert [e["request_key"] for e in events] == list(MAIN_KEYS.values())


def test_new_entries_store_the_latency_and_replay_it(server, tmp_path) -> None:
    """The entry keeps what the old client stored plus `latency_s`; a hit carries it."""
    clock = FakeClock()
    server.responder = clock.answering(1.25, lambda body: Reply.completion("timed"))
    path = tmp_path / "c.sqlite"

    async def go(mode: str) -> LlmResult:
        cache = LlmCache(path, mode)
        client = make_client(clock=clock)
        try:
            return await client.call(make_config(server), req("t"), meta=META, cache=cache)
        finally:
            await client.aclose()
            cache.close()

    live = asyncio.run(go("read_write"))
    replay = asyncio.run(go("replay"))
    assert live.latency_s == replay.latency_s == 1.25 and replay.cache_hit
    import sqlite3

    db = sqlite3.connect(path)
    (stored,) = db.execute("SELECT response FROM responses").fetchone()
    db.close()
    assert set(json.loads(stored)) == {
        "text", "tool_name", "tool_arguments", "tool_call_id", "refusal", "reasoning",
        "finish_reason", "served_model", "usage", "cache_hit", "latency_s",
    }  # fmt: skip


# --- connections closed when a run ends -------------------------------------------------------
def _established_to(port: int) -> int:
    """Connections to the loopback `port` that are open, read from the kernel's socket tables
    (state 01 = ESTABLISHED; the remote address is the third column)."""
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "01" and int(cols[2].rsplit(":", 1)[1], 16) == port:
                    n += 1
    return n


def test_a_run_leaves_no_connection_open(root, tmp_path, monkeypatch) -> None:
    from mbb.batch.build import run_condition

    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeOpenAIServer(schema_responder, api_key=SECRET, models=("m-a",)) as srv:
        port = int(srv.url.rsplit(":", 1)[1].split("/")[0])
        model = {
            "model": "m-a",
            "base_url": srv.url,
            "api_key_env": KEY_ENV,
            "structured": "json_object_schema",
            "concurrency": 5,
        }
        cond = load_params(
            root / "params" / "llm_negotiators.yaml",
            {
                "name": "closing",
                "subruns": 1,
                "workers": {"negotiator": "llm", "model": "a"},
                "models": {"a": model},
                "llm": {"cache": "off"},
            },
        )
        gc.disable()  # no collector closing forgotten sockets behind the run's back
        try:
            run_condition(cond, 0, tmp_path / "out")
            open_after = _established_to(port)
        finally:
            gc.enable()
        assert len(srv.completions) > 0
        assert open_after == 0


def test_aclose_closes_every_client_and_a_later_call_reopens(server) -> None:
    server.push(Reply.completion("1"), Reply.completion("2"))
    client = make_client()

    async def go() -> tuple[int, int, int]:
        await client.call(make_config(server), req("x"), meta=META)
        before = len(client.open_connections())
        await client.aclose()
        after = len(client.open_connections())
        await client.call(make_config(server), req("y"), meta=META)
        again = len(client.open_connections())
        await client.aclose()
        return before, after, again

    assert asyncio.run(go()) == (1, 0, 1)


def test_a_replay_stops_where_the_recorded_run_stopped_and_a_resume_retries(tmp_path):
    """The call that opened the endpoint breaker left only a stop marker in the cache: the
    replay stops at that call with the recorded reason, as the run did. A resumed run
    (read_write) neither counts recorded failures nor reads the marker: it asks again."""
    from mbb.core.errors import EndpointDown

    answering = False

    def responder(body):
        if not answering:
            return Reply.error(400, "no")
        return schema_responder(body)

    with FakeOpenAIServer(responder) as server:
        cfg = make_config(server)
        calls = [Call.of(cfg, req(f"q{i}"), META) for i in range(3)]

        async def go(mode: str) -> list[str]:
            client = make_client()
            stack = client.stack(cache=LlmCache(tmp_path / "c.sqlite", mode))
            out = []
            for call in calls:
                try:
                    await stack.complete(call)
                    out.append("ok")
                except EndpointDown as exc:
                    out.append("down: " + str(exc).split("down: ")[1][:32])
                except LlmUnavailable:
                    out.append("failed")
            await client.aclose()
            return out

        recorded = asyncio.run(go("read_write"))
        assert recorded == ["failed", "failed", "down: 3 call(s) in a row failed; the l"]
        sent = len(server.completions)
        replayed = asyncio.run(go("replay"))
        assert replayed == recorded
        assert len(server.completions) == sent  # nothing asked
        answering = True
        assert asyncio.run(go("read_write")) == ["failed", "failed", "ok"]


def test_a_replay_of_one_seed_stops_where_a_sibling_seed_stopped_it(tmp_path):
    """A batch's seeds share one breaker and one spend cap: a run can be stopped by its
    siblings' failures or spending, which a replay of that run alone cannot count again. The
    stop marker makes the lone replay stop at the same call (not a cache miss), and no
    replayed failure opens the breaker by counting."""
    from mbb.core.errors import EndpointDown

    def responder(body):
        if body["messages"][0]["content"].startswith("sibling"):
            return Reply.error(400, "no")
        return schema_responder(body)

    with FakeOpenAIServer(responder) as server:
        cfg = make_config(server)
        sibling = [Call.of(cfg, req(f"sibling {i}"), META) for i in range(3)]
        mine = Call.of(cfg, req("mine"), META)

        async def record() -> None:
            client = make_client()
            stack = client.stack(cache=LlmCache(tmp_path / "c.sqlite", "read_write"))
            for call in sibling[:2]:
                with pytest.raises(LlmUnavailable):
                    await stack.complete(call)
            with pytest.raises(EndpointDown, match="3 call"):
                await stack.complete(sibling[2])  # the sibling's third failure opens it
            with pytest.raises(EndpointDown, match="3 call"):
                await stack.complete(mine)  # and stops this run too
            await client.aclose()

        async def replay(calls: list[Call]) -> list[str]:
            client = make_client()
            stack = client.stack(cache=LlmCache(tmp_path / "c.sqlite", "replay"))
            out = []
            for call in calls:
                try:
                    await stack.complete(call)
                    out.append("ok")
                except EndpointDown as exc:
                    out.append("down" if "3 call(s) in a row failed; the last" in str(exc) else "?")
                except LlmUnavailable:
                    out.append("failed")
            await client.aclose()
            return out

        asyncio.run(record())
        sent = len(server.completions)
        assert asyncio.run(replay([mine])) == ["down"]  # alone: stopped where the batch was
        assert asyncio.run(replay([*sibling, mine])) == ["failed", "failed", "down", "down"]
        # replayed failures in another order than recorded open nothing by counting
        assert asyncio.run(replay([sibling[0], sibling[1], sibling[0]])) == ["failed"] * 3
        assert len(server.completions) == sent


def test_a_replay_stops_where_the_recording_ran_out_of_budget(server, tmp_path) -> None:
    """A spend cap shared by a batch stops a run at a call that a lone replay (which spends
    nothing) would otherwise miss in the cache: the marker stops the replay there, and a
    resumed run with budget left asks again."""
    cfg = make_config(server)
    calls = [Call.of(cfg, req(f"q{i}"), META) for i in range(2)]

    async def go(mode: str, ledger: SpendLedger | None) -> list[str]:
        client = make_client(budget=ledger)
        stack = client.stack(cache=LlmCache(tmp_path / "c.sqlite", mode))
        out = []
        for call in calls:
            try:
                out.append((await stack.complete(call)).text or "")
            except BudgetExhausted:
                out.append("budget")
        await client.aclose()
        return out

    server.push(Reply.completion("paid"))  # 15 tokens: the cap of 10 is then reached
    assert asyncio.run(go("read_write", SpendLedger(max_tokens_total=10))) == ["paid", "budget"]
    assert asyncio.run(go("replay", None)) == ["paid", "budget"]
    server.push(Reply.completion("later"))
    assert asyncio.run(go("read_write", None)) == ["paid", "later"]
    assert len(server.completions) == 2

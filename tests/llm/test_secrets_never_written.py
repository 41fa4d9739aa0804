"""Secrets never written (issue 26, item 4), against an endpoint that echoes the key everywhere
it can: the real `openai` client, a loopback server whose every answer carries the
`Authorization` header it received — in the answer's text, every string of its JSON action,
the reasoning field, the tool call's name, id and arguments, the refusal, the finish reason, a
usage field, a 400 error body and a 500 one — plainly, base64-encoded and URL-encoded, and also
the value of the params' other key variable, and parts of the key (without its `sk-` prefix,
without its last characters: a red team's 400 body "token <key minus sk-> is not allowed" got
16 of 19 characters into the events, the cache, study.json and the terminal). Then every file
mbb wrote (events, meta, tables, the LLM cache, the report's pages, the viewer's data) is
searched for any form of either key, and for any 12 consecutive characters of it.
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
import urllib.parse
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mbb.batch.build import load_params, run_condition
from mbb.batch.runner import run_many
from mbb.llm.redact import FRAGMENT, REDACTED, Redactor
from mbb.llm.redact import _encodings as _encoded
from mbb.testing.testserver import FakeOpenAIServer, Reply, declaring_responder

KEY = "sk-live-ECHOED-abcdefghijklmnopqrstuvwxyz0123456789"
KEY_ENV = "MBB_ECHO_TEST_KEY"
OTHER = "sk-other-ALSO-SECRET-9876543210zyxwvutsrq"  # another model's key variable
OTHER_ENV = "MBB_ECHO_OTHER_KEY"


def _forms(secret: str) -> list[str]:
    """What a search for the secret must not find: the value, URL-encoded, and base64 at the
    three alignments (standard and URL-safe), cores of at least 12 characters."""
    raw = secret.encode()
    out = {secret, urllib.parse.quote(secret, safe="")}
    for k in range(3):
        core = base64.b64encode(raw[k : k + 3 * ((len(raw) - k) // 3)]).decode()
        out |= {core, core.replace("+", "-").replace("/", "_")}
    return sorted(out)


def _runs(secret: str, n: int = 12) -> list[str]:
    """Every run of n consecutive characters of the secret (a part of the echo kept)."""
    return [secret[i : i + n] for i in range(len(secret) - n + 1)]


def _laced(value: Any, echo: str) -> Any:
    """Every string of an action with the echo appended (kept short where the schema caps)."""
    if isinstance(value, str):
        return f"{value} {echo}" if len(value) > 1 else value
    if isinstance(value, dict):
        return {k: _laced(v, echo) for k, v in value.items()}
    if isinstance(value, list):
        return [_laced(v, echo) for v in value]
    return value


class EchoingEndpoint:
    """A responder that sends back what it was sent: `auth` is read from the request headers
    by the handler below (the FakeOpenAIServer hands responders the body only)."""

    def __init__(self) -> None:
        self.n = itertools.count()
        self.local = threading.local()
        self.echoed = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        auth = self.local.auth  # "Bearer <key>"
        b64 = base64.b64encode(f"Authorization: {auth}".encode()).decode()
        key = auth.removeprefix("Bearer ")
        echo = f"[{auth}] [{b64}] [{urllib.parse.quote(auth)}] [{OTHER}] [{key[3:]}] [{key[1:-4]}]"
        i = next(self.n)
        self.echoed += 1
        if i % 9 == 4:
            return Reply.error(400, f"bad request; token {key[3:]} is not allowed; {b64}")
        if i % 9 == 7:
            return Reply.error(500, f"upstream saw {auth} and {OTHER}")
        reply = declaring_responder(body)
        assert isinstance(reply.body, dict)
        message = reply.body["choices"][0]["message"]
        if message.get("content"):
            try:
                message["content"] = json.dumps(_laced(json.loads(message["content"]), echo))
            except ValueError:  # a free-text answer (a report, a summary)
                message["content"] = f"{message['content']} {echo}"
        for call in message.get("tool_calls") or []:
            args = json.loads(call["function"]["arguments"])
            call["function"]["arguments"] = json.dumps(_laced(args, echo))
            call["id"] = f"call-{auth}"
            if i % 9 == 2:
                call["function"]["name"] += f" {auth}"
        message["reasoning_content"] = f"the header was {echo}"
        message["reasoning"] = f"again: {auth}"
        if i % 9 == 5:
            message["refusal"] = f"I refuse, {auth}"
        reply.body["choices"][0]["finish_reason"] = "stop" if i % 2 else f"stop {auth}"
        reply.body["model"] = auth
        if i % 9 == 8:  # a malformed usage field: the client retries, keeping none of it
            reply.body["usage"] = {"prompt_tokens": auth, "completion_tokens": 1}
        return reply


@pytest.fixture
def endpoint(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv(OTHER_ENV, OTHER)
    echo = EchoingEndpoint()
    srv = FakeOpenAIServer(echo, models=("m-json", "m-tools"))
    real = srv._next_reply

    def with_headers(body: dict[str, Any]) -> Reply:
        # the handler records each request, headers included, before asking for its reply;
        # every request carries the same header, so the last one recorded says what it was
        echo.local.auth = srv.requests[-1].headers.get("authorization", "")
        return real(body)

    srv._next_reply = with_headers  # type: ignore[method-assign]
    with srv:
        yield srv, echo


def _condition(root: Path, url: str, cache: Path) -> Any:
    common = {"base_url": url, "api_key_env": KEY_ENV, "timeout_s": 5.0, "max_retries": 3}
    return load_params(
        root / "params" / "llm_negotiators.yaml",
        {
            "name": "echo",
            "subruns": 2,
            "workers": {
                "count": 3,
                "negotiator": "llm",
                "model": "j",
                "overrides": {"W2": {"model": "t"}},
            },
            "models": {
                "j": {**common, "model": "m-json", "structured": "json_object_schema"},
                "t": {
                    **common,
                    "model": "m-tools",
                    "structured": "json_schema",
                    "tool_protocol": "native",
                },
                "other": {**common, "model": "m-other", "api_key_env": OTHER_ENV},
            },
            "llm": {"cache": "read_write", "cache_file": str(cache)},
        },
    )


def _texts(path: Path) -> list[str]:
    """What a file holds, as searchable text: parquet tables read back (their pages are
    compressed), everything else as raw bytes decoded leniently."""
    if path.suffix == ".parquet":
        return [pl.read_parquet(path).write_ndjson()]
    return [path.read_bytes().decode("utf-8", errors="replace")]


def test_an_echoing_endpoint_gets_no_key_into_any_file(root, tmp_path, endpoint) -> None:
    srv, echo = endpoint
    out = tmp_path / "out"
    cond = _condition(root, srv.url, tmp_path / "out" / "cache.sqlite")
    batch = run_many(cond, runs=2, out_dir=out / "echo", processes=1)
    assert batch.run_ids or batch.failed
    assert echo.echoed > 20 and all(
        r.headers.get("authorization") == f"Bearer {KEY}" for r in srv.completions
    )  # the key was sent, and echoed back every time
    # a replay from the cache writes the same (redacted) answers again
    replay = cond.model_copy(update={"llm": cond.llm.model_copy(update={"cache": "replay"})})
    run_condition(replay, 0, tmp_path / "replayed")
    from mbb.batch.report import build_report

    build_report(out, quiet=True)  # index, comparison and the viewer (events + cache)

    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in written) and any(
        p.name == "index.html" for p in written
    )
    assert any("viewer" in p.parts for p in written) and any(p.suffix == ".sqlite" for p in written)
    leaks = []
    for path in written:
        for text in _texts(path):
            for secret in (KEY, OTHER):
                for form in _forms(secret) + _runs(secret):
                    if form in text:
                        leaks.append((path.relative_to(tmp_path), form[:12]))
    assert leaks == []
    # and the echoes did reach the files, redacted: the test exercised the path
    events = "".join((out / "echo" / r / "events.jsonl").read_text() for r in batch.run_ids)
    assert REDACTED in events
    calls = pl.read_parquet(out / "echo" / "tables" / "llm_calls.parquet")
    assert calls["error"].drop_nulls().str.contains(REDACTED, literal=True).any()


def test_the_redactor_finds_every_form_the_test_searches_for() -> None:
    red = Redactor([KEY])
    for form in _forms(KEY):
        assert KEY not in (red.text(f"x {form} y") or "") and form not in (
            red.text(f"x {form} y") or ""
        )
    whole = base64.b64encode(f"Authorization: Bearer {KEY}".encode()).decode()
    assert not any(f in (red.text(whole) or "") for f in _forms(KEY))
    assert red.text("no secret here") == "no secret here"
    for part in (KEY[3:], KEY[1:-4], KEY[10:20], f"{KEY[5:30]}!{KEY[30:]}"):
        assert not any(r in (red.text(f"x {part} y") or "") for r in _runs(KEY, 10)), part
    assert red.text(f"x {KEY[:9]} y") == f"x {KEY[:9]} y"  # under FRAGMENT: ordinary text
    assert not Redactor(["short"])  # below MIN_SECRET: would garble text, protects nothing


def _has_run(text: str, secret: str, n: int) -> bool:
    return any(secret[i : i + n] in text for i in range(len(secret) - n + 1))


@settings(max_examples=300, deadline=None)
@given(
    secrets=st.lists(
        st.text(alphabet="abcXYZ-_09", min_size=12, max_size=30), min_size=1, max_size=3
    ),
    pieces=st.lists(
        st.tuples(
            st.integers(0, 2), st.integers(0, 29), st.integers(0, 30), st.text("abcZ .", max_size=6)
        ),
        max_size=6,
    ),
)
def test_no_run_of_fragment_characters_of_a_key_survives(secrets, pieces) -> None:
    """Any text made of pieces of the keys (at any offset, of any length) and filler: what
    comes out holds no run of FRAGMENT consecutive characters of any key, and a text holding
    none comes out unchanged. A small alphabet makes near-misses and overlaps common."""
    red = Redactor(secrets)
    text = "".join(f"{secrets[k % len(secrets)][a : a + n]}{filler}" for k, a, n, filler in pieces)
    out = red.text(text) or ""
    clean = out.replace(REDACTED, "\x00")
    for secret in secrets:
        assert not _has_run(clean, secret, FRAGMENT), (secret, text, out)
    if not any(_has_run(text, s, FRAGMENT) for s in secrets) and not any(
        f in text for s in secrets for f in _encoded(s)
    ):
        assert out == text

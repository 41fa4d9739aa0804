"""`mbb study` against hostile OpenAI-compatible endpoints (red team rt37's findings F1-F9), each
a loopback `FakeOpenAIServer` talked to through the real `openai` client: the pre-run check
gets a good answer, the calls after it the hostile one. Every key here is a fake one."""

from __future__ import annotations

import itertools
import json
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mbb.batch.study import load_study
from mbb.cli import main
from mbb.llm.redact import Redactor
from mbb.testing.stub import StubRouter
from mbb.testing.testserver import FakeOpenAIServer, Reply

# a fake key, mixed case: an echo lower-cased by the endpoint must be cut too (F2)
KEY = "sk-test-RT37SecretKey0123456789abcDEF"
KEY_ENV = "MBB_RT37_TEST_KEY"
PRICE = "{prompt: 1.0, completion: 2.0, date: 2026-11-01, source: test}"
PING = "Reply with OK."

Responder = Callable[[dict[str, Any], Reply], Reply]


def _study(tmp_path: Path, url: str, **extra: str) -> Path:
    """A one-run study (base, negotiators, one seed, 3 workers, one turn) of model `adv-m` at
    `url`, its key read from KEY_ENV, priced, retried once per call, one call at a time (the
    tests of which failures stop an endpoint depend on their order)."""
    fields = {
        "conditions": "[base]",
        "roles": "[negotiators]",
        "seeds": "0..0",
        "overrides": "{subruns: 1, workers: {count: 3}, negotiation: {max_turns: 1}}",
        "notebooks": "[]",
        **extra,
    }
    body = f"name: s\nout: {tmp_path / 'out'}\n" + "".join(f"{k}: {v}\n" for k, v in fields.items())
    model = (
        f"adv: {{model: adv-m, preset: vllm, base_url: '{url}', api_key_env: {KEY_ENV}, "
        f"max_retries: 1, timeout_s: 10, concurrency: 1, price: {PRICE}}}"
    )
    path = tmp_path / "s.yaml"
    path.write_text(body + "models:\n" + textwrap.indent(textwrap.dedent(model), "  "))
    return path


def run_against(
    tmp_path: Path, hostile: Responder, *args: str, ping_too: bool = False, **extra: str
) -> tuple[int, FakeOpenAIServer]:
    """Run the study command against a server whose answers (the emulator's, passed in as
    `good`) `hostile(body, good)` turns into its own; the pre-run check is answered well
    unless `ping_too`."""
    with FakeOpenAIServer(models=("adv-m",)) as server:
        path = _study(tmp_path, server.url, **extra)
        router = StubRouter(load_study(path).configs)

        def respond(body: dict[str, Any]) -> Reply:
            good = router(body)
            if body["messages"][-1].get("content") == PING and not ping_too:
                return good
            return hostile(body, good)

        server.responder = respond
        code = main(["study", str(path), *args])
    return code, server


def _leaks(text: str, secret: str = KEY, n: int = 12) -> list[str]:
    """Every run of `n` characters of `secret` found in `text`, letter case ignored."""
    low, sec = text.lower(), secret.lower()
    return [sec[i : i + n] for i in range(len(sec) - n + 1) if sec[i : i + n] in low]


def _folder_leaks(out: Path) -> dict[str, list[str]]:
    """Each file of the study folder (its bytes, the SQLite cache's too) holding part of KEY."""
    found = {}
    for path in out.rglob("*"):
        if path.is_file():
            hits = _leaks(path.read_bytes().decode("utf-8", errors="replace"))
            if hits:
                found[str(path.relative_to(out))] = hits
    return found


# --- F1, F2: the key never leaves in an error text -------------------------------------------
def _error_200_with_key(body: dict[str, Any], good: Reply) -> Reply:
    """A gateway's quota error sent with HTTP 200, echoing the key it was sent."""
    return Reply(body={"error": {"message": f"quota exceeded for key {KEY} (upstream)"}})


def _key_in_content_encoding(body: dict[str, Any], good: Reply) -> Reply:
    """A good answer whose Content-Encoding header is the key (mbb lower-cased it)."""
    return Reply(body=good.body, headers={"Content-Encoding": KEY})


@pytest.mark.parametrize("hostile", [_error_200_with_key, _key_in_content_encoding])
def test_a_key_echoed_in_an_error_reaches_no_terminal_line_and_no_file(
    tmp_path, capsys, monkeypatch, hostile
):
    """F1, F2: the key, echoed in an error body sent with HTTP 200 or in a header, reached the
    retry and stop lines, study.json, `run_ended` and (lower-cased, past a case-sensitive
    redactor) the LLM cache. Now the endpoint is stopped with one line, and no run of 12 of
    the key's characters, in any letter case, is in stderr, stdout or any file."""
    monkeypatch.setenv(KEY_ENV, KEY)
    code, server = run_against(tmp_path, hostile, "--no-report")
    assert code == 3 and len(server.completions) > 3  # stopped, after real calls
    said = capsys.readouterr()
    assert "stopped: endpoint adv-m at" in said.out + said.err
    assert "retrying adv-m at" in said.err  # the retry line was printed, and checked
    assert _leaks(said.out + said.err) == []
    out = tmp_path / "out"
    assert (out / "llm_cache.sqlite").is_file() and (out / "study.json").is_file()
    assert _folder_leaks(out) == {}
    runs = json.loads((out / "study.json").read_text())["runs"]
    assert [r["status"] for r in runs.values()] == ["stopped"]


def test_the_redactor_ignores_letter_case_whole_and_in_part():
    """F2: a key echoed lower-cased, or partly upper-cased, whole or without its prefix."""
    red = Redactor([KEY])
    for echo in (KEY.lower(), KEY.upper(), KEY.lower()[3:], KEY.swapcase()[5:-3]):
        assert _leaks(red.text(f"the key {echo} is not allowed") or "", n=10) == [], echo


# --- F5, F3, F4: bytes that are not UTF-8, lone surrogates ------------------------------------
def _raw(good: Reply) -> bytes:
    assert isinstance(good.body, dict)
    return json.dumps(good.body).encode()


def _not_utf8_json(body: dict[str, Any], good: Reply) -> Reply:
    """F5: `application/json` with the bytes ff fe inside a string."""
    raw = _raw(good)
    field = b'"content": "' if b'"content": "' in raw else b'"model": "'
    return Reply(body=raw.replace(field, field + b"\xff\xfe", 1))


def _surrogate_in(where: str) -> Responder:
    """F3 (`content`), F4 (`model`): a lone surrogate, `\\ud800` in the JSON, in that field."""

    def hostile(body: dict[str, Any], good: Reply) -> Reply:
        assert isinstance(good.body, dict)
        data = json.loads(json.dumps(good.body))
        if where == "model":
            data["model"] = "adv-m\ud800x"
        else:
            msg = data["choices"][0]["message"]
            msg["content"] = (msg.get("content") or "") + "\ud800"
        return Reply(body=data)

    hostile.__name__ = f"surrogate_in_{where}"
    return hostile


def _events(out: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for log in sorted(out.glob("runs/*/*/events.jsonl"))
        for line in log.read_text().splitlines()
    ]


@pytest.mark.parametrize(
    "hostile", [_not_utf8_json, _surrogate_in("content"), _surrogate_in("model")]
)
def test_an_answer_that_is_not_text_is_a_failed_call_and_a_healthy_rerun_finishes(
    tmp_path, capsys, monkeypatch, hostile
):
    """F5: bytes not UTF-8 escaped the provider (UnicodeDecodeError): no call recorded, none
    retried, the endpoint never stopped, the run completed on defaults and final. F3, F4: a
    lone surrogate in the answer's text or model crashed the report (on every later attempt),
    or failed the run, and the cached answer failed the rerun against a healthy endpoint. Now
    each such answer is a malformed one: recorded as a failed call of unknown cost, retried,
    the endpoint stopped (exit 3, resumable); the same command against a healthy endpoint
    makes the calls again and finishes, report and all."""
    monkeypatch.setenv(KEY_ENV, KEY)
    code, server = run_against(tmp_path, hostile, "--quiet")
    said = capsys.readouterr()
    assert code == 3, said
    # every call counted, as failed (the old summary: "0 LLM calls (0 failed)")
    m = re.search(r"(\d+) LLM calls \((\d+) failed\)", said.out)
    assert m and int(m[1]) == int(m[2]) >= 3, said.out
    assert "stopped: endpoint adv-m at" in said.err and "MalformedResponse" in said.err
    out = tmp_path / "out"
    ended = [e for e in _events(out) if e["kind"] == "run_ended"]
    assert [e["status"] for e in ended] == ["stopped"]
    sent = len(server.completions)

    code, server = run_against(tmp_path, lambda body, good: good, "--quiet")
    assert code == 0, capsys.readouterr()
    assert len(server.completions) > 1  # the calls were made again, not served from the cache
    ended = [e for e in _events(out) if e["kind"] == "run_ended"]
    assert [e["status"] for e in ended] == ["completed"] and sent > 1
    assert (out / "index.html").is_file()


def test_a_text_holding_a_lone_surrogate_is_written_with_a_replacement_character(tmp_path):
    """F3: the report's and the viewer's writer (`replace_file`) wrote such a text with a
    traceback (UnicodeEncodeError); a request holding one is keyed, not raised on."""
    from mbb.core.paths import replace_file
    from mbb.llm.cache import request_key

    replace_file(tmp_path / "page.html", "answer \ud800 end")
    assert (tmp_path / "page.html").read_text() == "answer \ufffd end"
    assert len(request_key({"messages": [{"role": "user", "content": "x\ud800"}]})) == 64


# --- F6: no control character of an endpoint's reaches the terminal ---------------------------
ANSI = "\x1b[2K\x1b[1A\x1b[31mFAKE: all runs finished OK\x1b[0m\x9b2J\x7f\x07"


@pytest.mark.parametrize(
    "hostile",
    [
        lambda body, good: Reply(body={"error": {"message": f"quota {ANSI} exceeded"}}),
        lambda body, good: Reply.error(400, f"bad request\nline two\r{ANSI}"),
    ],
    ids=["error_200", "error_400"],
)
def test_an_endpoints_escape_codes_are_written_out_in_every_line_it_reaches(
    tmp_path, capsys, monkeypatch, hostile
):
    """F6: ESC sequences (erase the line above, print in red), a C1 CSI, DEL and BEL in an
    error's text reached stderr raw in the retry and stop lines, while the pre-run check's line
    wrote them out. Now every such line writes them as `\\xNN`, the same on every path."""
    monkeypatch.setenv(KEY_ENV, KEY)
    code, _ = run_against(tmp_path, hostile, "--no-report")
    said = capsys.readouterr()
    assert code == 3
    text = said.out + said.err
    assert "stopped: endpoint adv-m at" in text and "\\x1b[2K" in text
    assert not set(text) & {"\x1b", "\x9b", "\x7f", "\x07"}
    # the pre-run check's line, the same way
    (tmp_path / "ping").mkdir()
    code, _ = run_against(tmp_path / "ping", hostile, "--no-report", ping_too=True)
    said = capsys.readouterr()
    assert code != 0 and "does not answer" in said.err and "\\x1b[2K" in said.err
    assert not set(said.out + said.err) & {"\x1b", "\x9b", "\x7f", "\x07"}


# --- F7: token counts that cannot be true -----------------------------------------------------
def _usage(prompt: int, completion: int) -> Responder:
    def hostile(body: dict[str, Any], good: Reply) -> Reply:
        assert isinstance(good.body, dict)
        data = json.loads(json.dumps(good.body))
        data["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        return Reply(body=data)

    hostile.__name__ = f"usage_{prompt}_{completion}"
    return hostile


@pytest.mark.parametrize("hostile", [_usage(0, 0), _usage(10**9, 10**9), _usage(50, 10**6)])
def test_token_counts_that_cannot_be_true_are_unknown_and_said(
    tmp_path, capsys, monkeypatch, hostile
):
    """F7: 0 tokens for real answers priced them at $0, 10**9 at $54,000, without a word. Now
    such counts are not taken: each call's tokens and cost are unknown (null), the report's
    spend reads unknown, and the study's last lines say how many answers sent such counts."""
    monkeypatch.setenv(KEY_ENV, KEY)
    code, _ = run_against(tmp_path, hostile, "--quiet")
    out = capsys.readouterr().out
    assert code == 0, out
    calls = [e for e in _events(tmp_path / "out") if e["kind"] == "llm_call"]
    assert calls and all(e["cost_usd"] is None and e["prompt_tokens"] is None for e in calls)
    # each call's event says why its counts are unknown (the endpoint sent counts, not taken)
    assert all(e["usage_implausible"] for e in calls)
    (line,) = [x for x in out.splitlines() if x.startswith("usage: ")]
    assert f"{len(calls)} of them reported counts that cannot be true" in line, line
    report = (tmp_path / "out" / "index.html").read_text()
    assert f"unknown ({len(calls)} calls without usage)" in report


def test_the_bounds_of_believable_token_counts():
    """F7: the bounds `plausible_usage` states, each side of each."""
    from mbb.llm.provider import PROMPT_SLACK, REASONING_ALLOWANCE, plausible_usage
    from mbb.llm.types import Usage

    body = {"messages": [{"role": "user", "content": "hello"}]}
    size = len(json.dumps(body))
    parts = {"text": "hi"}

    def ok(prompt: int, completion: int, **p: Any) -> bool:
        u = plausible_usage(Usage(prompt=prompt, completion=completion), p or parts, body, 512)
        return u.reported and not u.implausible

    assert ok(10, 5) and ok(size + PROMPT_SLACK, 512 + REASONING_ALLOWANCE)
    assert not ok(10, 0) and ok(10, 0, text="")  # an empty answer may cost 0 tokens
    assert not ok(0, 5) and not ok(size + PROMPT_SLACK + 1, 5)
    assert not ok(10, 512 + REASONING_ALLOWANCE + 1)
    assert plausible_usage(Usage(reported=False), parts, body, 512) == Usage(reported=False)


# --- F8: an endpoint failing every other call -------------------------------------------------
def test_an_endpoint_failing_every_other_call_is_stopped_and_its_runs_resume(
    tmp_path, capsys, monkeypatch
):
    """F8: each success reset the count of failures in a row, so an endpoint failing every
    other call played the study through: completed, invalid, not resumable. Now more than
    `invalid_share` failed calls among its last 40 stop it (the third failure at 5 %): the run
    stops, resumable, and the same command against a healthy endpoint finishes it."""
    monkeypatch.setenv(KEY_ENV, KEY)
    seen = itertools.count()

    def every_other(body: dict[str, Any], good: Reply) -> Reply:
        return Reply.error(400, "not now") if next(seen) % 2 else good

    code, _ = run_against(tmp_path, every_other, "--quiet")
    said = capsys.readouterr()
    assert code == 3, said
    assert "3 of its last 40 calls failed, more than 5%" in said.err
    ended = [e for e in _events(tmp_path / "out") if e["kind"] == "run_ended"]
    assert [e["status"] for e in ended] == ["stopped"]
    code, _ = run_against(tmp_path, lambda body, good: good, "--quiet")
    assert code == 0, capsys.readouterr()
    ended = [e for e in _events(tmp_path / "out") if e["kind"] == "run_ended"]
    assert [e["status"] for e in ended] == ["completed"]


# --- F9: answers in accepted formats, read the same whatever their label -----------------------
def _not_utf8_text_plain(body: dict[str, Any], good: Reply) -> Reply:
    """F9: the bytes of F5, labelled `text/plain` (the HTTP client read them with U+FFFD)."""
    reply = _not_utf8_json(body, good)
    reply.headers["Content-Type"] = "text/plain"
    return reply


def test_bytes_that_are_not_utf8_fail_the_call_whatever_the_content_type(
    tmp_path, capsys, monkeypatch
):
    """F9: the same bad bytes were a failed call as JSON and 25 successful calls as text; now
    both are malformed answers: failed calls, the endpoint stopped."""
    monkeypatch.setenv(KEY_ENV, KEY)
    code, _ = run_against(tmp_path, _not_utf8_text_plain, "--quiet")
    said = capsys.readouterr()
    assert code == 3, said
    assert "an answer that is not UTF-8" in said.err


def test_content_as_a_list_of_text_parts_is_joined_and_other_parts_refused():
    """F9: the list's JSON was read as the answer (every answer repaired); now its text parts
    are joined, and a part that is not text makes the answer malformed."""
    from mbb.llm.provider import MalformedResponse, parse_response

    def answer(content: Any) -> dict[str, Any]:
        return {"choices": [{"message": {"role": "assistant", "content": content}}]}

    parts = [{"type": "text", "text": '{"a": '}, {"type": "output_text", "text": "1}"}]
    assert parse_response(answer(parts))["text"] == '{"a": 1}'
    assert parse_response(answer([]))["text"] == ""
    for bad in ([{"type": "image_url", "image_url": {"url": "x"}}], ["plain"], [{"type": "text"}]):
        with pytest.raises(MalformedResponse):
            parse_response(answer(bad))


def test_a_single_run_stops_an_endpoint_failing_every_other_call(
    tmp_path, root, capsys, monkeypatch
):
    """The failure-share stop was a study's only: `mbb run` against an endpoint failing every
    other call played on, each success resetting the count of failures in a row. Now a run
    outside a study stops it at the default invalid share (5 % of its last 40 calls), stopped
    and resumable, as a study does. One call at a time (`concurrency: 1`): with calls in
    flight together, three failures could end in a row and stop it by the other rule."""
    from mbb.batch.build import load_params

    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.chdir(tmp_path)  # the run's request cache goes to ./outputs: not the project's
    seen = itertools.count()
    with FakeOpenAIServer(models=("adv-m",)) as server:
        params = tmp_path / "p.yaml"
        params.write_text(
            f"extends: {root / 'params' / 'llm_negotiators.yaml'}\n"
            "name: adv_run\nsubruns: 1\nworkers: {count: 3, model: adv}\n"
            "negotiation: {max_turns: 1}\nmodels:\n"
            f"  adv: {{model: adv-m, preset: vllm, base_url: '{server.url}', "
            f"api_key_env: {KEY_ENV}, max_retries: 1, timeout_s: 10, concurrency: 1}}\n"
            f"prices:\n  adv-m: {PRICE}\n"
        )
        router = StubRouter(load_params(params).models)

        def respond(body: dict[str, Any]) -> Reply:
            good = router(body)
            return Reply.error(400, "not now") if next(seen) % 2 else good

        server.responder = respond
        code = main(["run", str(params), "--out", str(tmp_path / "out"), "--quiet"])
    said = capsys.readouterr()
    assert code == 3, said
    assert "of its last 40 calls failed, more than 5%" in said.err
    logs = sorted((tmp_path / "out").glob("*/events.jsonl"))
    ended = [json.loads(x) for log in logs for x in log.read_text().splitlines()]
    assert [e["status"] for e in ended if e["kind"] == "run_ended"] == ["stopped"]

"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for offline tests and benchmarks.

It speaks enough of the chat-completions API (POST /v1/chat/completions, GET /v1/models) for
the official `openai` client, answers from a queue of scripted `Reply`s or a responder function,
and injects faults (429 + Retry-After, 5xx, slow replies, dropped connections, malformed bodies,
refusals, bad tool arguments, 401, unknown models). Every request is recorded with its start and
end time so tests can assert on counts, overlap and headers without timing the wall clock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "FakeOpenAIServer",
    "RecordedRequest",
    "Reply",
    "declaring_responder",
    "schema_responder",
]


@dataclass
class Reply:
    """One scripted HTTP answer. `body` dict → JSON; str or bytes → sent verbatim (malformed
    or compressed on purpose)."""

    status: int = 200
    body: dict[str, Any] | str | bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drop: bool = False  # close the connection without answering
    trickle_s: float = 0.0  # send the answer a byte at a time, this long between bytes

    @classmethod
    def completion(
        cls,
        content: str | None = None,
        *,
        tool_calls: list[dict[str, Any]] | None = None,
        refusal: str | None = None,
        usage: dict[str, Any] | None = None,
        model: str | None = None,
        delay_s: float = 0.0,
        finish_reason: str = "stop",
    ) -> Reply:
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if refusal is not None:
            message["refusal"] = refusal
        if tool_calls:
            message["tool_calls"] = tool_calls
            finish_reason = "tool_calls"
        body = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": usage or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        return cls(body=body, delay_s=delay_s)

    @classmethod
    def json(cls, obj: Any, **kw: Any) -> Reply:
        return cls.completion(json.dumps(obj), **kw)

    @classmethod
    def tool_call(cls, name: str, arguments: str, **kw: Any) -> Reply:
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        return cls.completion(None, tool_calls=[call], **kw)

    @classmethod
    def refused(cls, text: str = "I can't help with that.", **kw: Any) -> Reply:
        return cls.completion(None, refusal=text, **kw)

    @classmethod
    def error(
        cls,
        status: int,
        message: str = "error",
        *,
        retry_after: float | None = None,
        code: str | None = None,
    ) -> Reply:
        headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
        body = {"error": {"message": message, "type": "test_error", "code": code}}
        return cls(status=status, body=body, headers=headers)

    @classmethod
    def malformed(cls) -> Reply:
        return cls(status=200, body='{"id": "x", "choices": [ this is not json')

    @classmethod
    def slow(cls, delay_s: float, content: str = "{}") -> Reply:
        return cls.completion(content, delay_s=delay_s)

    @classmethod
    def dropped(cls) -> Reply:
        return cls(drop=True)

    @classmethod
    def trickled(cls, every_s: float, content: str = "{}") -> Reply:
        """A valid answer sent one byte every `every_s` seconds: each read is quick, the whole
        answer is not (a stalled proxy, or an endpoint holding its client)."""
        reply = cls.completion(content)
        reply.trickle_s = every_s
        return reply


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    started: float  # time.monotonic()
    ended: float = 0.0


Responder = Callable[[dict[str, Any]], Reply]


class _QuietServer(ThreadingHTTPServer):
    """A client that goes away (a timeout, Ctrl-C) is not an error of the server: no traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class FakeOpenAIServer:
    """Threaded HTTP server; use as a context manager. `url` is the OpenAI `base_url`."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        models: tuple[str, ...] = ("test-model",),
        api_key: str | None = None,
        delay_s: float = 0.0,
    ) -> None:
        self.queue: deque[Reply] = deque()
        self.responder = responder
        self.models = models
        self.api_key = api_key  # when set, other Authorization values get 401
        self.delay_s = delay_s  # added to every completion (fixed latency)
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._in_flight = 0
        self.max_in_flight = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- scripting ---------------------------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        self.queue.extend(replies)

    @property
    def completions(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self.queue:
            return self.queue.popleft()
        if self.responder is not None:
            return self.responder(body)
        return Reply.completion("{}")

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def setup(self) -> None:
                super().setup()
                # A reply is one write, but a client's next request may arrive while a previous
                # reply is unacknowledged: without NODELAY, Nagle plus the client's delayed ACK
                # can add ~40 ms to a response.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:
                rec = server._record(self, None)
                if self.path.rstrip("/").endswith("/models"):
                    data = [{"id": m, "object": "model", "owned_by": "test"} for m in server.models]
                    self._send(Reply(body={"object": "list", "data": data}))
                else:
                    self._send(Reply.error(404, f"no route {self.path}"))
                server._done(rec)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"null")
                except json.JSONDecodeError:
                    body = None
                rec = server._record(self, body)
                try:
                    self._answer(body)
                finally:
                    server._done(rec)

            def _answer(self, body: Any) -> None:
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(Reply.error(404, f"no route {self.path}"))
                    return
                auth = self.headers.get("Authorization")
                if server.api_key is not None and auth != f"Bearer {server.api_key}":
                    self._send(Reply.error(401, "Incorrect API key", code="invalid_api_key"))
                    return
                if not isinstance(body, dict):
                    self._send(Reply.error(400, "request body is not JSON"))
                    return
                if body.get("model") not in server.models:
                    msg = f"The model `{body.get('model')}` does not exist"
                    self._send(Reply.error(404, msg, code="model_not_found"))
                    return
                reply = server._next_reply(body)
                # a completion built without a model answers as the model asked for, as an
                # endpoint serving it does (`model=` names another: a router's choice)
                if (
                    isinstance(reply.body, dict)
                    and reply.body.get("object") == "chat.completion"
                    and reply.body.get("model") is None
                ):
                    reply = dataclasses.replace(
                        reply, body={**reply.body, "model": body.get("model")}
                    )
                # Encoded before the latency: once it has passed, one write and done (with five
                # replies due at once, their encoding would otherwise queue on the GIL).
                wire = self._wire(reply)
                delay = reply.delay_s + (server.delay_s if reply.status == 200 else 0.0)
                if delay:
                    time.sleep(delay)
                if reply.drop:
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if reply.trickle_s:
                    self._trickle(wire, reply.trickle_s)
                    return
                self._write(wire)

            def _trickle(self, wire: bytes, every_s: float) -> None:
                try:
                    for i in range(len(wire)):
                        self.wfile.write(wire[i : i + 1])
                        self.wfile.flush()
                        time.sleep(every_s)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def _send(self, reply: Reply) -> None:
                self._write(self._wire(reply))

            def _wire(self, reply: Reply) -> bytes:
                """Status line, headers and body as one buffer, sent in one write."""
                if isinstance(reply.body, bytes):
                    payload = reply.body
                elif isinstance(reply.body, str):
                    payload = reply.body.encode()
                else:
                    payload = json.dumps(reply.body if reply.body is not None else {}).encode()
                headers = {
                    "Content-Type": "application/json",
                    "Content-Length": str(len(payload)),
                    **reply.headers,
                }
                phrase = self.responses.get(reply.status, ("",))[0]
                head = f"{self.protocol_version} {reply.status} {phrase}\r\n" + "".join(
                    f"{k}: {v}\r\n" for k, v in headers.items()
                )
                return (head + "\r\n").encode("latin-1") + payload

            def _write(self, wire: bytes) -> None:
                try:
                    self.wfile.write(wire)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    self.close_connection = True

        httpd = _QuietServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(0.02,), name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- recording ---------------------------------------------------------------------------
    def _record(self, handler: BaseHTTPRequestHandler, body: Any) -> RecordedRequest:
        rec = RecordedRequest(
            method=handler.command,
            path=handler.path,
            headers={k.lower(): v for k, v in handler.headers.items()},
            body=body if isinstance(body, dict) else None,
            started=time.monotonic(),
        )
        with self._lock:
            self.requests.append(rec)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        return rec

    def _done(self, rec: RecordedRequest) -> None:
        with self._lock:
            self._in_flight -= 1
            rec.ended = time.monotonic()

    def max_overlap(self) -> int:
        """Most completion requests in flight at once, from the recorded intervals."""
        events = []
        for r in self.completions:
            events.append((r.started, 1))
            events.append((r.ended or float("inf"), -1))
        best = cur = 0
        for _, d in sorted(events, key=lambda e: (e[0], e[1])):
            cur += d
            best = max(best, cur)
        return best


# --- a schema-driven stand-in model ----------------------------------------------------------
def _schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a request asks its answer to follow, in any of the three modes."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt["json_schema"]["schema"]
    if fmt.get("schema"):
        return fmt["schema"]
    tool = _chosen_tool(body)
    if tool is not None:
        return tool["function"]["parameters"]
    return _schema_in_prompt(body)


def _chosen_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The tool a request forces (`tool_choice` names a function), else its first tool."""
    tools = body.get("tools") or []
    choice = body.get("tool_choice")
    name = (choice.get("function") or {}).get("name") if isinstance(choice, dict) else None
    for t in tools:
        if name is not None and t["function"]["name"] == name:
            return t
    return tools[0] if tools else None


SCHEMA_MARKER = "JSON Schema:\n"


_ASKED = re.compile(r"Answer with the `(\w+)` JSON object")


def _schema_in_prompt(body: dict[str, Any]) -> dict[str, Any] | None:
    """prompt_only requests carry the schema in the text, after "JSON Schema:". When the last
    message asks for a named answer (a negotiator's conversation lists all three schemas in its
    system prompt), the schema after that name; else the last one."""
    messages = body.get("messages") or []
    texts = [m.get("content") for m in messages if isinstance(m.get("content"), str)]
    asked = _ASKED.search(texts[-1]) if texts else None
    for text in reversed(texts):
        at = -1
        if asked is not None:
            named = text.find(f"`{asked.group(1)}` (")
            at = text.find(SCHEMA_MARKER, named) if named >= 0 else -1
        if at < 0:
            at = text.rfind(SCHEMA_MARKER)
        if at < 0:
            continue
        try:
            obj, _ = json.JSONDecoder().raw_decode(text, at + len(SCHEMA_MARKER))
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def _instance(schema: dict[str, Any], defs: dict[str, Any], rnd: Any, depth: int = 0) -> Any:
    """A valid instance of (the subset of JSON Schema that pydantic emits) `schema`."""
    if "$ref" in schema:
        return _instance(defs[schema["$ref"].split("/")[-1]], defs, rnd, depth)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return _instance(options[0], defs, rnd, depth)
    if "enum" in schema:
        return rnd.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object":
        return {
            k: _instance(v, defs, rnd, depth + 1) for k, v in schema.get("properties", {}).items()
        }
    if kind == "array":
        item = schema.get("items", {})
        n = schema.get("minItems", 0 if depth > 1 else 1)
        n = min(max(n, 1 if depth <= 1 else 0), schema.get("maxItems", n))
        enum = item.get("enum")
        if enum and n <= len(enum):  # e.g. a ranking: distinct ids
            return rnd.sample(list(enum), n)
        return [_instance(item, defs, rnd, depth + 1) for _ in range(n)]
    if kind == "integer":
        lo, hi = schema.get("minimum", 0), schema.get("maximum", 100)
        return rnd.randint(int(lo), int(max(lo, min(hi, lo + 200))))
    if kind == "number":
        return float(schema.get("minimum", 0.0))
    if kind == "boolean":
        return False
    return "ok"


def schema_responder(body: dict[str, Any]) -> Reply:
    """Answers every structured request with a valid instance of its schema (deterministic:
    seeded by the request itself), and free-text requests with a short sentence — a stand-in
    model for whole runs through the arena. Tool requests get a tool call with the instance."""
    import random

    rnd = random.Random(json.dumps(body.get("messages", []), sort_keys=True))
    schema = _schema_of(body)
    if schema is None:
        return Reply.completion("Noted: bids, outcomes and commitments of this subrun.")
    payload = json.dumps(_instance(schema, schema.get("$defs", {}), rnd))
    tool = _chosen_tool(body)
    if tool is not None:
        return Reply.tool_call(tool["function"]["name"], payload)
    return Reply.completion(payload)


_IDS = r"([A-Za-z0-9_.-]+(?:, [A-Za-z0-9_.-]+)*)"
_PEERS = re.compile(r"Peers: " + _IDS + r"\.")
_RANK = re.compile(r"Rank all of " + _IDS + r";")
_DECLARE = re.compile(r"Bid 0\.\.(\d+) credits, duration (\d+)\.\.(\d+) s, position 1\.\.(\d+)")


def _read_the_turn(schema: dict[str, Any], text: str) -> None:
    """Constrain a schema by what the turn's instruction says, as a model reading it would:
    peers, candidates to rank, bid and duration ranges (the schemas in the prompt and in the
    tools are static, for the prefix cache; the round's limits are in the text)."""
    props = schema.get("properties", {})
    defs = schema.get("$defs", {})
    if (m := _DECLARE.search(text)) and "bid" in props:
        budget, lo, hi, n = map(int, m.groups())
        props["bid"].update(minimum=0, maximum=budget)
        props["duration"].update(minimum=lo, maximum=hi)
        props["position"].update(minimum=1, maximum=n)
    if (m := _PEERS.search(text)) and "MessageOut" in defs:
        to = defs["MessageOut"]["properties"]["to"]
        peers = m.group(1).split(", ")
        for branch in to.get("anyOf", [to]):
            if branch.get("type") == "string":
                branch["enum"] = peers
    if (m := _RANK.search(text)) and "ranking" in props:
        cands = m.group(1).split(", ")
        for key in ("ranking", "allocations"):
            props[key].update(minItems=len(cands), maxItems=len(cands))
        props["ranking"]["items"]["enum"] = cands
        alloc = defs["AllocationOut"]["properties"]
        alloc["candidate"]["enum"] = cands
        alloc["seconds"].update(minimum=0, maximum=30)
    if "revision" in props:  # keep to the declared bid: no revision
        props["revision"] = {"const": None}


def declaring_responder(body: dict[str, Any]) -> Reply:
    """`schema_responder` as a negotiator that reads its turn: it never withdraws (a random valid
    declaration withdraws half the time, which ends most runs after a few rounds), and keeps to
    the peers, candidates and ranges the turn's instruction states."""
    import copy

    body = copy.deepcopy(body)
    fmt = body.get("response_format") or {}
    tool = _chosen_tool(body)
    nodes = [fmt.get("schema"), (fmt.get("json_schema") or {}).get("schema")]
    nodes += [tool["function"]["parameters"]] if tool else []
    schema = _schema_in_prompt(body) if not any(nodes) else None
    users = [m.get("content") for m in body.get("messages") or [] if m.get("role") == "user"]
    last = users[-1] if users and isinstance(users[-1], str) else ""
    for node in [*nodes, schema]:
        if not isinstance(node, dict):
            continue
        action = node.get("properties", {}).get("action")
        if isinstance(action, dict) and "enum" in action:
            action["enum"] = ["declare"]
        _read_the_turn(node, last)
    target = next((n for n in [*nodes, schema] if isinstance(n, dict)), None)
    if target is None:
        return schema_responder(body)
    answer = _instance(target, target.get("$defs", {}), _rnd(body))
    if isinstance(answer, dict) and answer.get("ranking") and "allocations" in answer:
        answer["allocations"] = [{"candidate": c, "seconds": 30} for c in answer["ranking"]]
    payload = json.dumps(answer)
    if tool is not None:
        return Reply.tool_call(tool["function"]["name"], payload)
    return Reply.completion(payload)


def _rnd(body: dict[str, Any]) -> Any:
    import random

    return random.Random(json.dumps(body.get("messages", []), sort_keys=True))

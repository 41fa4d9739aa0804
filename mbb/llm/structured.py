"""Structured actions: ask for JSON under a schema, validate it, repair once, else default.

The stated rule for an LLM's invalid action: the validation error is sent back once (a repair
round-trip, its `LlmCall` event flagged `repair`); if the second answer is still invalid — or the
endpoint is unavailable after retries — the action's stated default is used and an
`InvalidAction` event (rule "default") records what was wrong. Never a crash, never silent.
Configuration errors (bad key, unknown model, replay cache miss) do propagate: they are the
operator's to fix, and defaulting every action would silently run a different experiment.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from mbb.core import safejson
from mbb.core.events import InvalidAction
from mbb.llm.cache import LlmCache
from mbb.llm.client import CallMeta, ChatRequest, Emit, LlmClient, LlmResult, LlmUnavailable
from mbb.llm.config import ModelConfig

__all__ = [
    "ActionSpec",
    "InvalidOutput",
    "StructuredOutcome",
    "ask_action",
    "build_request",
    "extract_json",
    "load_json",
    "parse_output",
    "refuse_cut_off",
    "strict_schema",
    "tool_for",
]

# how an answer must be given, when the request itself does not say it (and the repair turn)
JSON_ONLY = "Answer with a single JSON object and nothing else."
JSON_WITH_SCHEMA = (
    "Answer with a single JSON object and nothing else. It must match this JSON Schema:\n{schema}"
)
USE_TOOL = "Submit your answer by calling the function `{name}`."
REPAIR = """\
Your previous answer could not be used: {error}
Answer again with a corrected JSON object that follows the rules and the schema exactly."""
REPAIR_TOOL = """\
Your previous answer could not be used: {error}
Call `{name}` again with corrected arguments that follow the rules and the schema exactly."""

OutT = TypeVar("OutT", bound=BaseModel)
A = TypeVar("A")


class InvalidOutput(ValueError):
    """The model's answer could not become a valid action; `field` says where."""

    def __init__(self, message: str, field: str = "output") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ActionSpec(Generic[OutT, A]):
    """What to ask for and how to turn the answer into an action model.

    `convert` builds the action and raises `InvalidOutput`/`ValueError` for violations that
    depend on the round (unknown peer, bid over budget...), so they get the same one repair.
    """

    name: str  # schema / function name, e.g. "declaration"
    out_model: type[OutT]
    convert: Callable[[OutT], A]
    default: A
    default_rule: str  # human-readable statement of the default, recorded in InvalidAction
    schema: dict[str, Any] | None = None  # overrides out_model's schema (e.g. enums of peers)
    # native tool protocol: the tools sent (default: this action's alone). A caller that keeps
    # one conversation sends the same list every turn, so the prompt's prefix stays the same
    tools: list[dict[str, Any]] | None = None

    def json_schema(self) -> dict[str, Any]:
        return self.schema if self.schema is not None else strict_schema(self.out_model)


@dataclass(frozen=True)
class StructuredOutcome(Generic[A]):
    action: A
    calls: int
    repaired: bool  # a repair round-trip was needed (whatever its result)
    defaulted: bool
    error: str | None = None
    # the messages that followed the request: the model's answer(s) and any repair request, so a
    # caller keeping a conversation can append exactly what was said
    exchange: tuple[dict[str, Any], ...] = ()


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A JSON schema accepted by strict structured-output modes: every property required,
    no additional properties, no titles/defaults noise.

    Built once per model (pydantic's schema generation costs ~0.3 ms, more than the rest of
    a cached call); each caller gets its own copy, free to patch enums and bounds into it.
    """
    return _copy_json(_strict_schema(model))


@functools.cache
def _strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = copy.deepcopy(model.model_json_schema())

    def fix(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("title", None)
            node.pop("default", None)
            if node.get("type") == "object" and "properties" in node:
                node["required"] = list(node["properties"])
                node["additionalProperties"] = False
            for v in node.values():
                fix(v)
        elif isinstance(node, list):
            for v in node:
                fix(v)

    fix(schema)
    return schema


def _copy_json(node: Any) -> Any:
    """A deep copy of plain JSON data (dicts, lists, scalars), ~10x faster than copy.deepcopy."""
    if isinstance(node, dict):
        return {k: _copy_json(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copy_json(v) for v in node]
    return node


def load_json(text: str) -> Any:
    """`json.loads` for a model's text: JSON nested deeper than Python's parser recurses
    ("[[[[...") raises JSONDecodeError like any malformed answer (a RecursionError is not a
    ValueError, and escaped every reader of answers: the run applied a default action without
    counting the call as failed)."""
    return safejson.loads(text)


def extract_json(text: str) -> Any:
    """The whole text as JSON, else the first JSON object embedded in it (code fences, prose);
    InvalidOutput when there is none."""
    stripped = text.strip()
    try:
        return load_json(stripped)
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    start = stripped.find("{")
    while start != -1:
        try:
            obj, _ = decoder.raw_decode(stripped, start)
            return obj
        except json.JSONDecodeError:
            start = stripped.find("{", start + 1)
        except RecursionError:
            raise InvalidOutput("the reply's JSON is nested too deeply", "output") from None
    raise InvalidOutput("the reply contains no JSON object", "output")


def tool_for(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A function tool submitting the action `name`."""
    return {
        "type": "function",
        "function": {"name": name, "description": f"Submit your {name}.", "parameters": schema},
    }


def build_request(
    config: ModelConfig,
    messages: list[dict[str, Any]],
    spec: ActionSpec[Any, Any],
    *,
    instruct: bool = True,
) -> ChatRequest:
    """Attach the schema the way this endpoint understands it (see `ModelConfig.structured`).

    `instruct=False`: the messages already say how to answer (and, where the endpoint needs it
    in the text, give the schema), so nothing is appended to the last message."""
    schema = spec.json_schema()
    msgs = [dict(m) for m in messages]
    if config.tool_protocol == "native":
        tools = spec.tools if spec.tools is not None else [tool_for(spec.name, schema)]
        choice = {"type": "function", "function": {"name": spec.name}}
        if instruct:
            msgs[-1]["content"] += "\n\n" + USE_TOOL.format(name=spec.name)
        return ChatRequest(messages=msgs, tools=tools, tool_choice=choice)
    if config.structured == "json_schema":
        fmt = {
            "type": "json_schema",
            "json_schema": {"name": spec.name, "schema": schema, "strict": True},
        }
        if instruct:
            msgs[-1]["content"] += "\n\n" + JSON_ONLY
        return ChatRequest(messages=msgs, response_format=fmt)
    if instruct:
        schema_text = json.dumps(schema, separators=(",", ":"))
        msgs[-1]["content"] += "\n\n" + JSON_WITH_SCHEMA.format(schema=schema_text)
    if config.structured == "json_object_schema":
        return ChatRequest(messages=msgs, response_format={"type": "json_object", "schema": schema})
    return ChatRequest(messages=msgs)  # prompt_only


def _raw(result: LlmResult) -> str:
    if result.tool_arguments is not None:
        return result.tool_arguments
    return result.text or ""


def refuse_cut_off(result: LlmResult, raw: str) -> None:
    """A reply cut off at max_tokens: its first complete inner object is not the answer, and
    the model should be told why (not "field required")."""
    if result.finish_reason != "length":
        return
    try:
        load_json(raw)
    except json.JSONDecodeError:
        raise InvalidOutput(
            "the answer was cut off at the token limit before its JSON was complete; answer "
            "again, shorter",
            "output",
        ) from None


def parse_output(result: LlmResult, spec: ActionSpec[OutT, A]) -> A:
    """Reply → out model → action; raises InvalidOutput naming the offending field."""
    if result.refusal:
        raise InvalidOutput(f"the model refused: {result.refusal[:200]}", "refusal")
    if result.finish_reason == "content_filter":  # what is left may be cut or replaced
        raise InvalidOutput(
            "the endpoint's content filter stopped the answer (finish_reason content_filter)",
            "output",
        )
    raw = _raw(result)
    if not raw.strip():
        raise InvalidOutput(f"empty reply (finish_reason={result.finish_reason})", "output")
    refuse_cut_off(result, raw)
    data = extract_json(raw)
    try:
        out = spec.out_model.model_validate(data)
    except ValidationError as exc:
        errs = exc.errors()
        lines = [f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in errs[:8]]
        field = ".".join(map(str, errs[0]["loc"])) if errs else "output"
        raise InvalidOutput("; ".join(lines), field or "output") from None
    try:
        return spec.convert(out)
    except InvalidOutput:
        raise
    except (ValueError, ValidationError) as exc:
        raise InvalidOutput(str(exc)[:500], "output") from None


async def ask_action(
    llm: LlmClient,
    config: ModelConfig,
    messages: list[dict[str, Any]],
    spec: ActionSpec[OutT, A],
    *,
    meta: CallMeta,
    emit: Emit | None = None,
    cache: LlmCache | None = None,
    instruct: bool = True,
) -> StructuredOutcome[A]:
    """One call, at most one repair round-trip, else the spec's default (recorded)."""
    req = build_request(config, messages, spec, instruct=instruct)
    sent = len(req.messages)
    calls = 0
    error: InvalidOutput | None = None
    raw = ""
    for attempt in range(2):
        call_meta = meta if attempt == 0 else meta.as_repair()
        try:
            result = await llm.call(config, req, meta=call_meta, emit=emit, cache=cache)
        except LlmUnavailable as exc:
            _record_default(emit, meta, "llm", None, str(exc), spec)
            gone = {"role": "assistant", "content": "(no answer: the endpoint was unavailable)"}
            exchange = (*req.messages[sent:], gone)
            return StructuredOutcome(
                spec.default, calls + 1, attempt > 0, True, str(exc), exchange=exchange
            )
        calls += 1
        raw = _raw(result) or (result.refusal or "")
        answer = {"role": "assistant", "content": raw or "(no content)"}
        try:
            action = parse_output(result, spec)
            exchange = (*req.messages[sent:], answer)
            return StructuredOutcome(action, calls, attempt > 0, False, exchange=exchange)
        except InvalidOutput as exc:
            error = exc
        if attempt == 0:
            req = ChatRequest(
                messages=[
                    *req.messages,
                    answer,
                    {"role": "user", "content": _repair(req, spec.name, str(error))},
                ],
                response_format=req.response_format,
                tools=req.tools,
                tool_choice=req.tool_choice,
            )
    assert error is not None
    _record_default(emit, meta, error.field, raw[:500], str(error), spec)
    exchange = (*req.messages[sent:], {"role": "assistant", "content": raw or "(no content)"})
    return StructuredOutcome(spec.default, calls, True, True, str(error), exchange=exchange)


def _repair(req: ChatRequest, name: str, error: str) -> str:
    """The repair request, in the protocol the answer is given in: a native tool call is asked
    for again as a call, not as "a JSON object" (F-7)."""
    if req.tools:
        return REPAIR_TOOL.format(error=error, name=name)
    return REPAIR.format(error=error)


def _record_default(
    emit: Emit | None,
    meta: CallMeta,
    field: str,
    value: Any,
    detail: str,
    spec: ActionSpec[Any, Any],
) -> None:
    if emit is None:
        return
    emit(
        InvalidAction,
        worker=meta.worker,
        subrun=meta.subrun,
        round=meta.round,
        phase=meta.phase,
        field=field,
        value=value,
        rule="default",
        detail=f"{detail[:500]} -> {spec.default_rule}",
    )

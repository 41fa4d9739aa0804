"""An LLM-backed solver: a minimal tool loop over the real-task harness.

Inside a granted window the model picks one tool per turn (read, write, edit, bash, memory,
release, request); the harness runs it on the shared resource and the result goes back with an
arena notice (seconds left in the window, deadline approaching). Outside a window only
`request`, `memory` and `withdraw` work: the arena asks the solver for its next request and the
model answers with those tools. Two action protocols, from `ModelConfig.tool_protocol`:

- `native`: OpenAI function calling; one tool call per turn (if a model sends several, the
  first is executed and only it is kept in the history, so the conversation stays valid);
- `json_action`: the reply is one JSON object `{"tool": ..., "args": {...}}` under a schema
  (for endpoints whose tool calling is unreliable, e.g. small local models).

Stated handling of bad output: an unknown tool or invalid arguments is not executed; the error
goes back to the model as the turn's result and an `InvalidAction` event (rule "reported")
records it. An unavailable endpoint ends the window (rule "release") or, outside a window,
gives the default request (rule "default"). A window holds at most `max_turns_per_window`
model turns; then the solver releases it. Configuration errors and replay misses stop the run.

Completion is decided by the hidden tests, not by the model: `release(finished=true)` is a
completion claim, checked by running the task's hidden tests on the workspace as it is
(`mbb.tasks.harness`: off the event loop, at a cost in window time, at most
`CLAIMS_PER_WINDOW` per window; a further claim in the window is refused, rule "claim_limit").
Only if every hidden test passes is the task completed (the window ends, the arena records
`completed`). Otherwise the claim is recorded as an `InvalidAction` (field `release.finished`,
rule "not_completed", with the pass count), the model is told the task is not complete yet
(not which tests fail, nor how many: the tests stay hidden) and the window goes on. The paper
is silent on failed claims; this is mbb's choice. A claim is a `command` event of tool `claim`
whose runtime is what it cost the window.

Progress (`progress`, recorded with every window) is the share of hidden tests the workspace
passes, measured after each window in which a command ran: scored like every real-task solver's.

Time (`time.model`): under `virtual` and `measured` only commands (and claims) consume a
window. Under `charged` (the paper's clock: the deadline ticks while the solver thinks) every
model call costs its latency (`LlmResult.latency_s`, recorded in the `llm_call` event and stored
with the answer in the replay cache, so a replay charges the same seconds and reproduces the
run): inside a window it consumes the window, outside a window (planning the next request) it
is handed to the arena with the request (`Request.thought_s`), which counts it against the
worker's deadline. The after-action report after the subrun costs nothing. A reply that arrives
after the window's hard end is not executed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mbb.agents.prompts import solver as sp
from mbb.core.actions import Request, Withdraw
from mbb.core.agent_api import (
    SolverView,
    SubrunRecap,
    TaskAssignment,
    WindowGrant,
    WindowOutcome,
)
from mbb.core.events import CommandRun, InvalidAction
from mbb.llm.cache import LlmCache
from mbb.llm.client import CallMeta, ChatRequest, Emit, LlmClient, LlmResult, LlmUnavailable
from mbb.llm.config import ModelConfig
from mbb.llm.structured import (
    InvalidOutput,
    extract_json,
    load_json,
    refuse_cut_off,
    strict_schema,
)
from mbb.params import Condition
from mbb.protocol.explain import explain_solver, render
from mbb.resource.resource import ExecutionResource, printable
from mbb.tasks.evaluator import Evaluation
from mbb.tasks.harness import (
    CLAIMS_PER_WINDOW,
    Measured,
    SolverTools,
    ToolResult,
    WorkspaceEvaluation,
    claim_cost_s,
    evaluate_off_loop,
)
from mbb.tasks.suite import Suite

if TYPE_CHECKING:
    from mbb.core.scratch import Scratch
    from mbb.params import SolverLoopParams

__all__ = ["TOOL_ARGS", "LlmSolver", "ToolCall", "parse_tool_call", "tool_schemas"]


# --- tool arguments: validated like every other agent action ----------------------------------
class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadArgs(_Args):
    path: str = Field(min_length=1)


class WriteArgs(_Args):
    path: str = Field(min_length=1)
    text: str


class EditArgs(_Args):
    path: str = Field(min_length=1)
    old: str = Field(min_length=1)
    new: str


class BashArgs(_Args):
    command: str = Field(min_length=1)


class MemoryArgs(_Args):
    text: str = Field(min_length=1)


class ReleaseArgs(_Args):
    finished: bool


class RequestArgs(_Args):
    seconds: int


class WithdrawArgs(_Args):
    reason: str


ToolName = Literal["read", "write", "edit", "bash", "memory", "release", "request", "withdraw"]
TOOL_ARGS: dict[str, type[_Args]] = {
    "read": ReadArgs,
    "write": WriteArgs,
    "edit": EditArgs,
    "bash": BashArgs,
    "memory": MemoryArgs,
    "release": ReleaseArgs,
    "request": RequestArgs,
    "withdraw": WithdrawArgs,
}
IN_WINDOW = ("read", "write", "edit", "bash", "memory", "release", "request")
OUTSIDE = ("request", "memory", "withdraw")


@dataclass(frozen=True, slots=True)
class ToolCall:
    tool: str
    args: _Args
    call_id: str | None = None  # native protocol: echoed in the tool message


def tool_schemas(window_min: int, window_max: int) -> list[dict[str, Any]]:
    """Function definitions for the native protocol (strict schemas: every field required)."""
    docs = _tool_docs(window_min, window_max)
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": docs[name],
                "parameters": strict_schema(model),
            },
        }
        for name, model in TOOL_ARGS.items()
    ]


def json_action_schema(*, tied: bool = True) -> dict[str, Any]:
    """The JSON-action protocol's reply schema: one tool name and its arguments.

    `tied` (default): one alternative per tool, its name as a constant next to its own
    arguments, so a grammar-constrained endpoint (llama.cpp) cannot pair a tool with another
    tool's arguments. Strict OpenAI structured outputs want an object at the root, so there
    (`tied=False`) the name and the arguments are two properties and the pairing is checked
    after parsing."""
    if tied:
        return {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"tool": {"const": name}, "args": strict_schema(model)},
                    "required": ["tool", "args"],
                    "additionalProperties": False,
                }
                for name, model in TOOL_ARGS.items()
            ]
        }
    return {
        "type": "object",
        "properties": {
            "tool": {"type": "string", "enum": list(TOOL_ARGS)},
            "args": {"anyOf": [strict_schema(m) for m in TOOL_ARGS.values()]},
        },
        "required": ["tool", "args"],
        "additionalProperties": False,
    }


def _tool_docs(window_min: int, window_max: int, memory: bool = True) -> dict[str, str]:
    docs = {
        k: v.format(window_min=window_min, window_max=window_max) for k, v in sp.TOOL_DOCS.items()
    }
    if not memory:
        docs["memory"] = sp.TOOL_MEMORY_OFF
    return docs


def parse_tool_call(result: LlmResult) -> ToolCall:
    """The model's reply → one validated tool call; raises InvalidOutput naming the field.

    A native tool call is read from the call; otherwise the text must hold a JSON action (a
    native endpoint that answers in text gets the same lenient reading)."""
    if result.refusal:
        raise InvalidOutput(f"the model refused: {result.refusal[:200]}", "refusal")
    if result.tool_name is not None:
        name, call_id = result.tool_name, result.tool_call_id
        try:
            args = load_json(result.tool_arguments or "{}")
        except json.JSONDecodeError as exc:
            raise InvalidOutput(f"arguments of {name} are not JSON: {exc}", "args") from None
    else:
        text = (result.text or "").strip()
        if not text:
            raise InvalidOutput(f"empty reply (finish_reason={result.finish_reason})", "output")
        refuse_cut_off(result, text)
        data = extract_json(text)
        if not isinstance(data, dict) or "tool" not in data:
            raise InvalidOutput('the reply must be {"tool": ..., "args": {...}}', "tool")
        name, args, call_id = data["tool"], data.get("args", {}), None
    if name not in TOOL_ARGS:
        raise InvalidOutput(f"unknown tool {name!r}; tools: {', '.join(TOOL_ARGS)}", "tool")
    try:
        return ToolCall(str(name), TOOL_ARGS[name].model_validate(args), call_id)
    except ValidationError as exc:
        errs = exc.errors()
        lines = [f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in errs[:6]]
        loc = ".".join(map(str, errs[0]["loc"])) if errs else ""
        raise InvalidOutput(
            f"{name}: " + "; ".join(lines), f"args.{loc}" if loc else "args"
        ) from None


def _fmt(seconds: float) -> str:
    return f"{seconds:.0f}"


@dataclass
class _Turn:
    """One model turn as it stays in the history: the reply, its result and any notices."""

    messages: list[dict[str, Any]]


@dataclass
class _CommandLine:
    tool: str
    what: str
    runtime_s: float
    ok: bool


@dataclass
class _Window:
    grant: WindowGrant
    turns_left: int
    why: str = "allocation"
    claims: int = 0  # completion claims checked in this window


@dataclass
class LlmSolver(WorkspaceEvaluation):
    """Satisfies `mbb.core.agent_api.Solver` on real tasks with a model choosing the tool calls."""

    worker: str
    config: ModelConfig
    llm: LlmClient
    suite: Suite
    resource: ExecutionResource
    emit: Emit | None
    cache: LlmCache | None
    loop: SolverLoopParams
    window_min_s: int
    window_max_s: int
    n_others: int = 0
    time_model: str = "virtual"  # virtual | measured | charged (charged: model latency counts)
    condition: Condition | None = None  # whose rules the system prompt states (None: defaults)
    concurrent: bool = False  # windows are sequential; requests are polled one by one

    task_id: str | None = None
    subrun: int = 0
    tools: SolverTools | None = None
    finished: bool = False
    withdrawn: str | None = None
    pending: Request | None = None
    last_evaluation: Evaluation | None = None
    windows: int = 0
    _head: list[dict[str, Any]] = field(default_factory=list)
    _turns: list[_Turn] = field(default_factory=list)
    _dropped: int = 0  # turns left out of the prompt (advanced in chunks: see `_request`)
    _notices: list[str] = field(default_factory=list)
    _commands: list[_CommandLine] = field(default_factory=list)
    _deadline_s: float = math.inf
    _need_s: float = 0.0
    _window: _Window | None = None
    _samples: str = ""
    _memory: str = "(none)"
    _claim_failed: bool = False  # the last release(finished=true) failed the hidden tests
    _thought_s: float = 0.0  # charged: model latency outside windows not yet handed over
    measured: Measured | None = None
    progress_share: float = 0.0

    # --- Solver protocol ----------------------------------------------------------------------
    async def start_subrun(self, task: TaskAssignment, scratch: Scratch | None) -> None:
        built = self.suite[task.task_id]
        self.task_id, self.subrun = task.task_id, task.subrun
        self.resource.assign(self.worker, built)
        self.tools = SolverTools(
            self.worker, self.resource, scratch=scratch, emit=self.emit, subrun=task.subrun
        )
        self.finished, self.withdrawn, self.pending = False, None, None
        self.last_evaluation, self.windows = None, 0
        self.measured, self.progress_share, self._thought_s = None, 0.0, 0.0
        self._turns, self._notices, self._commands = [], [], []
        self._dropped = 0
        self._need_s = float(self.window_max_s)
        self._deadline_s = math.inf
        self._samples = "\n".join(f"  $ {s}" for s in built.samples) or "  (none)"
        memory = scratch.render() if scratch is not None else ""
        self._memory = memory or "(none)"
        self._head = [{"role": "system", "content": self.system_prompt()}]

    def rules(self) -> str:
        """The condition's rules as this solver reads them (`mbb.protocol.explain_solver`)."""
        return render(explain_solver(self._condition(), self.n_others))

    def _condition(self) -> Condition:
        if self.condition is not None:
            return self.condition
        return Condition.model_validate(
            {
                "windows": {"min_s": self.window_min_s, "max_s": self.window_max_s},
                "time": {"model": self.time_model},
            }
        )

    def system_prompt(self) -> str:
        """The static system prompt: the task, the condition's rules, the tools."""
        memory = self._condition().memory.enabled
        docs = _tool_docs(self.window_min_s, self.window_max_s, memory)
        protocol = (
            ""
            if self.config.tool_protocol == "native"
            else sp.JSON_ACTION.format(schema=json.dumps(self._schema(), separators=(",", ":")))
        )
        return sp.SYSTEM.format(
            worker=self.worker,
            rules=self.rules(),
            tool_docs="\n".join(f"- {d}" for d in docs.values()),
            protocol=protocol,
        )

    def need_s(self) -> float:
        return self._need_s

    async def next_action(self, view: SolverView) -> Request | Withdraw | None:
        if self.finished or self.withdrawn is not None:
            return None
        self._deadline_s = view.deadline_s
        if len(self._head) == 1:  # the task statement, once the first view gives the clock
            self._head.append({"role": "user", "content": self._task_text(view)})
        if self.pending is None:
            await self._plan(view)
        withdrawn: str | None = self.withdrawn  # _plan may have set it (mypy keeps it narrowed)
        thought, self._thought_s = self._thought_s, 0.0
        if withdrawn is not None:
            reason = withdrawn[:200] or "the solver gave up the task"
            return Withdraw(reason=reason, thought_s=thought)
        request, self.pending = self.pending, None
        if request is not None and thought > 0:
            request = request.model_copy(update={"thought_s": thought})
        return request

    async def run_window(self, grant: WindowGrant) -> WindowOutcome:
        assert self.tools is not None, "start_subrun first"
        self.resource.open_window(grant)
        self.windows += 1
        self.tools.released = False
        win = self._window = _Window(grant, self.loop.max_turns_per_window)
        self._notices.append(
            sp.NOTICE_WINDOW_STARTED.format(
                allocation=grant.allocation_s,
                end=_fmt(grant.hard_end_s),
                now=_fmt(grant.start_s),
                deadline_left=_fmt(self._deadline_s - grant.start_s),
                turns=win.turns_left,
            )
        )
        try:
            while win.turns_left > 0 and self.resource.remaining_s(self.worker) > 0:
                win.turns_left -= 1
                call = await self._turn("work", IN_WINDOW)
                if call is None:  # endpoint unavailable: recorded; the window is handed back
                    win.why = "released: the model was unavailable"
                    break
                if call.tool == "release" and not self._claim_failed:
                    win.why = "released"
                    break
                self._after_command_notice(win)
            else:
                if win.turns_left <= 0 and self.resource.remaining_s(self.worker) > 0:
                    win.why = f"released after the limit of {self.loop.max_turns_per_window} turns"
        finally:
            self._window = None
        used = self.tools.release()
        await self.measure_progress()
        self._notices.append(
            sp.NOTICE_WINDOW_OVER.format(
                why=win.why, used=_fmt(used), allocation=grant.allocation_s
            )
        )
        early = used < grant.hard_end_s - grant.start_s
        return WindowOutcome(
            used_s=used, completed=self.finished, released=early and not self.finished
        )

    @property
    def done(self) -> bool:
        return self.finished

    @property
    def progress(self) -> float:
        """The share of hidden tests the workspace passed when last measured (after each
        window in which a command ran, and at every completion claim)."""
        return self.progress_share

    async def end_subrun(self, recap: SubrunRecap, scratch: Scratch | None) -> None:
        """The solver's after-action report into scratch, kind `solver_report` (stored only with
        reports on: `Scratch.accepts`), shown to its negotiator and itself as the solver's.
        With reports off its model is not asked (an answer nobody keeps costs tokens)."""
        if scratch is None or not scratch.accepts("solver_report"):
            return
        shown = self._commands[-self.loop.report_commands :]
        lines = [
            f"  {c.tool} {c.what} ({c.runtime_s:.0f} s, {'ok' if c.ok else 'failed'})"
            for c in shown
        ]
        if len(shown) < len(self._commands):
            lines.insert(0, f"  ({len(self._commands) - len(shown)} earlier commands omitted)")
        user = sp.REPORT_USER.format(
            task=recap.task_id,
            outcome=recap.outcome,
            score=f"{recap.score:.2f}",
            windows=recap.windows,
            granted=_fmt(recap.granted_s),
            used=_fmt(recap.used_s),
            waited=_fmt(recap.waited_s),
            n_commands=len(self._commands),
            command_s=_fmt(sum(c.runtime_s for c in self._commands)),
            commands="\n".join(lines) or "  (none)",
            memory=scratch.render() or "(none)",
        )
        system = sp.REPORT_SYSTEM.format(
            worker=self.worker, rules=self.rules(), max_words=self.loop.report_words
        )
        req = ChatRequest(
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}]
        )
        meta = CallMeta(self.worker, "report", "solver_report", subrun=recap.subrun)
        try:
            res = await self.llm.call(self.config, req, meta=meta, emit=self.emit, cache=self.cache)
        except LlmUnavailable:
            return  # recorded in the LlmCall event; no report this subrun
        text = (res.text or "").strip()
        if text:
            scratch.write("solver_report", recap.subrun, text, by="solver")

    # --- the loop -----------------------------------------------------------------------------
    def _task_text(self, view: SolverView) -> str:
        return sp.TASK.format(
            task=self.task_id,
            subrun_no=self.subrun,
            deadline=_fmt(view.deadline_s),
            now=_fmt(view.now_s),
            window_min=view.window_min_s,
            window_max=view.window_max_s,
            samples=self._samples,
            memory=self._memory,
        )

    async def _plan(self, view: SolverView) -> None:
        """Outside a window: ask for a request (or a withdrawal); else the stated default (the
        notice states it with its number, and the next turn is told when it was applied)."""
        seconds = int(min(view.window_max_s, max(view.window_min_s, self._need_s)))
        self._notices.append(
            sp.NOTICE_OUTSIDE.format(
                now=_fmt(view.now_s),
                deadline_left=_fmt(view.deadline_s - view.now_s),
                window_min=view.window_min_s,
                window_max=view.window_max_s,
                turns=self.loop.planning_turns,
                default=seconds,
            )
        )
        for _ in range(self.loop.planning_turns):
            call = await self._turn("request", OUTSIDE)
            if call is None or self.pending is not None or self.withdrawn is not None:
                break
        if self.pending is None and self.withdrawn is None:
            self.pending = Request(duration=seconds)
            self._notices.append(
                sp.NOTICE_DEFAULT_REQUEST.format(turns=self.loop.planning_turns, seconds=seconds)
            )
            self._invalid(
                "request",
                "request",
                None,
                "default",
                f"no request after {self.loop.planning_turns} turn(s) outside the window -> "
                f"the default request of {seconds} s (the last estimate, within the window bounds)",
            )

    async def _turn(self, phase: str, allowed: tuple[str, ...]) -> ToolCall | None:
        """One model call and the execution of the tool it picked; None if unavailable."""
        req = self._request()
        meta = CallMeta(
            self.worker, "solver", phase, subrun=self.subrun, round=self._round(), repair=False
        )
        self._claim_failed = False
        try:
            result = await self.llm.call(
                self.config, req, meta=meta, emit=self.emit, cache=self.cache
            )
        except LlmUnavailable as exc:
            self._charge(exc.latency_s)
            rule = "release" if phase == "work" else "default"
            self._invalid(phase, "llm", None, rule, str(exc))
            return None
        reply = self._reply_message(result)
        if self._charge(result.latency_s) and self.resource.remaining_s(self.worker) <= 0:
            msg = "error: your window ended while you were deciding (nothing was run)"
            self._record_turn(reply, result, msg)
            return ToolCall("late", _Args())
        try:
            call = parse_tool_call(result)
        except InvalidOutput as exc:
            raw = result.tool_arguments if result.tool_name else result.text
            self._invalid(phase, exc.field, (raw or "")[:300], "reported", str(exc))
            self._record_turn(reply, result, f"error: {exc} (nothing was run)")
            return ToolCall("invalid", _Args())
        if call.tool not in allowed:
            where = "inside a window" if phase == "work" else "outside a window"
            msg = f"error: {call.tool} is not available {where}; available: {', '.join(allowed)}"
            self._invalid(phase, "tool", call.tool, "reported", msg)
            self._record_turn(reply, result, msg)
            return call
        self._record_turn(reply, result, await self._execute(call))
        return call

    def _round(self) -> int | None:
        return self._window.grant.round if self._window is not None else None

    def _request(self) -> ChatRequest:
        # At most `history_turns` recent turns are shown. Older ones are dropped in chunks of
        # half that, not one per turn: between two drops every request extends the previous one
        # (the same prefix for the server's cache); a sliding window would change it every turn.
        keep = self.loop.history_turns
        if len(self._turns) - self._dropped > keep:
            self._dropped = len(self._turns) - max(1, keep // 2)
        turns = self._turns[self._dropped :]
        messages = [dict(m) for m in self._head]
        if self._dropped:
            skipped = self._dropped
            messages.append({"role": "user", "content": f"({skipped} earlier turns omitted)"})
        for t in turns:
            messages.extend(t.messages)
        if self._notices:
            messages.append({"role": "user", "content": "\n".join(self._notices)})
        if self.config.tool_protocol == "native":
            return ChatRequest(
                messages=messages,
                tools=tool_schemas(self.window_min_s, self.window_max_s),
                tool_choice="required",
            )
        schema = self._schema()
        fmt: dict[str, Any] | None = None
        if self.config.structured == "json_schema":
            fmt = {
                "type": "json_schema",
                "json_schema": {"name": "solver_action", "schema": schema, "strict": True},
            }
        elif self.config.structured == "json_object_schema":
            fmt = {"type": "json_object", "schema": schema}
        return ChatRequest(messages=messages, response_format=fmt)

    def _schema(self) -> dict[str, Any]:
        return json_action_schema(tied=self.config.structured != "json_schema")

    def _reply_message(self, result: LlmResult) -> dict[str, Any]:
        if self.config.tool_protocol == "native" and result.tool_name is not None:
            call = {
                "id": result.tool_call_id or "call_0",
                "type": "function",
                "function": {"name": result.tool_name, "arguments": result.tool_arguments or ""},
            }
            return {"role": "assistant", "content": result.text, "tool_calls": [call]}
        return {"role": "assistant", "content": result.text or result.tool_arguments or ""}

    def _record_turn(self, reply: dict[str, Any], result: LlmResult, outcome: str) -> None:
        """Keep the reply and its result; pending notices were shown before it, so they move
        into this turn's history in front of the reply."""
        msgs: list[dict[str, Any]] = []
        if self._notices:
            msgs.append({"role": "user", "content": "\n".join(self._notices)})
            self._notices = []
        msgs.append(reply)
        if "tool_calls" in reply:
            call_id = reply["tool_calls"][0]["id"]
            msgs.append({"role": "tool", "tool_call_id": call_id, "content": outcome})
        else:
            msgs.append({"role": "user", "content": outcome})
        self._turns.append(_Turn(msgs))

    async def _execute(self, call: ToolCall) -> str:
        """Run the tool; the text the model sees as the result."""
        t = self.tools
        assert t is not None
        a = call.args
        if isinstance(a, RequestArgs):
            lo, hi = self.window_min_s, self.window_max_s
            seconds = max(lo, min(hi, a.seconds))
            self.pending = Request(duration=seconds)
            self._need_s = float(seconds)
            clamp = f" (clamped to {lo}..{hi})" if seconds != a.seconds else ""
            return f"ok: your next request is {seconds} s{clamp}"
        if isinstance(a, MemoryArgs):
            r = t.memory(a.text)  # memory off: refused, and the refused write is an event
            return "ok: saved to memory" if r.ok else f"error: {r.error}"
        if isinstance(a, WithdrawArgs):
            self.withdrawn = a.reason or "withdrawn"
            return "ok: you withdraw from this task"
        if isinstance(a, ReleaseArgs):
            if not a.finished:
                return "ok: window released"
            return await self._claim()
        if isinstance(a, ReadArgs):
            r, what = t.read(a.path), a.path
        elif isinstance(a, WriteArgs):
            r, what = t.write(a.path, a.text), a.path
        elif isinstance(a, EditArgs):
            r, what = t.edit(a.path, a.old, a.new), a.path
        else:
            assert isinstance(a, BashArgs)
            r, what = t.bash(a.command), a.command
        # what the after-action report shows: no NUL or lone surrogate reaches a prompt
        self._commands.append(_CommandLine(call.tool, printable(what)[:80], r.runtime_s, r.ok))
        return self._render_result(r)

    def _charge(self, seconds: float) -> bool:
        """`charged` time model: the model's latency consumes the window inside one; outside a
        window it is kept for the next request, which hands it to the arena (its deadline).
        True if it was charged to a window."""
        if self.time_model != "charged":
            return False
        if self._window is None:
            self._thought_s += max(0.0, seconds)
            return False
        self.resource.charge(self.worker, seconds)
        return True

    def _claim_event(self, runtime: float, exit_code: int | None, killed: bool, why: str) -> None:
        if self.emit is None:
            return
        now = self.resource.now_s()
        self.emit(
            CommandRun,
            worker=self.worker,
            tool="claim",
            command="(completion claim: the hidden tests on the workspace)",
            exit_code=exit_code,
            runtime=runtime,
            stdout_bytes=0,
            stderr_bytes=0,
            truncated=False,
            killed=killed,
            reason=why,
            **({"t": now} if now is not None else {}),
        )

    async def _claim(self) -> str:
        """A completion claim: checked against the hidden tests at a cost in window time, at
        most `CLAIMS_PER_WINDOW` per window (see the module docstring)."""
        win = self._window
        assert win is not None and self.task_id is not None
        self._claim_failed = True  # the window goes on unless the claim is confirmed
        if win.claims >= CLAIMS_PER_WINDOW:
            msg = (
                f"at most {CLAIMS_PER_WINDOW} completion claim per window is checked and this "
                "window's has been made: not checked, nothing charged"
            )
            self._invalid("work", "release.finished", True, "claim_limit", msg)
            return f"refused: {msg}; your window continues"
        win.claims += 1
        remaining = self.resource.remaining_s(self.worker)
        modeled = self.time_model != "measured"
        cost = claim_cost_s(self.resource.costs) if modeled else 0.0
        if modeled and cost > remaining:  # would not fit: not started, the window ends
            self.resource.charge(self.worker, remaining)
            self._claim_event(remaining, None, True, "window_end")
            return "cut off: the window ended before the hidden tests could run (nothing checked)"
        ev, held = await evaluate_off_loop(
            self.suite[self.task_id],
            self.resource.workspace(self.worker),
            worker=self.worker,
            reference_mode=self.resource.reference_mode,
        )
        self.measured = Measured(self._state(), ev, held)
        self.progress_share = ev.result.score
        spent = cost if modeled else min(ev.wall_s, remaining)
        self.resource.charge(self.worker, spent)
        late = not modeled and ev.wall_s > remaining
        code = 0 if ev.result.resolved else 1
        self._claim_event(spent, None if late else code, late, "window_end" if late else "claim")
        if late:
            return "cut off: the window ended before the hidden tests finished (nothing checked)"
        if ev.result.resolved:
            self.finished = True
            self._claim_failed = False
            return "ok: window released (the hidden tests pass: task completed)"
        self._invalid(
            "work",
            "release.finished",
            True,
            "not_completed",
            f"declared finished, but {ev.result.passed} of {ev.result.total} hidden tests pass: "
            "not completed; the window continues",
        )
        # a result, not advice: what release(false) does is in the tool's own doc (F-10)
        return "not completed: not every hidden test passes; your window continues."

    def _render_result(self, r: ToolResult) -> str:
        cap = self.loop.output_chars
        out = r.output
        if len(out) > cap:
            out = out[:cap] + f"\n... ({len(r.output) - cap} more characters cut)"
        head = f"ok ({r.runtime_s:.1f} s)" if r.ok else f"error ({r.runtime_s:.1f} s): {r.error}"
        return f"{head}\n{out}" if out else head

    def _after_command_notice(self, win: _Window) -> None:
        now = self.resource.now_s()
        left = self.resource.remaining_s(self.worker)
        if now is None or left <= 0:
            return
        deadline_left = self._deadline_s - now
        self._notices.append(
            sp.NOTICE_TIME_LEFT.format(
                left=_fmt(left), turns=win.turns_left, deadline_left=_fmt(deadline_left)
            )
        )
        if deadline_left <= self.loop.deadline_warning_s:
            self._notices.append(sp.NOTICE_DEADLINE.format(deadline_left=_fmt(deadline_left)))

    def _invalid(self, phase: str, fld: str, value: Any, rule: str, detail: str) -> None:
        if self.emit is None:
            return
        self.emit(
            InvalidAction,
            worker=self.worker,
            subrun=self.subrun,
            round=self._round(),
            phase=f"solver_{phase}",
            field=fld,
            value=value,
            rule=rule,
            detail=detail[:500],
        )


def make_llm_solver(
    worker: str,
    *,
    config: ModelConfig,
    llm: LlmClient,
    suite: Suite,
    resource: ExecutionResource,
    emit: Emit | None,
    cache: LlmCache | None,
    loop: SolverLoopParams,
    window_min_s: int,
    window_max_s: int,
    n_others: int,
    time_model: str,
    condition: Condition | None = None,
) -> LlmSolver:
    """Factory the arena calls for `workers.solver: llm` on `tasks.kind: real` (`condition`:
    the condition whose rules its prompt states)."""
    tm = {"modeled": "virtual"}.get(time_model, time_model)
    if tm != resource.time_model:
        raise ValueError(
            f"time_model {time_model!r} does not match the resource's {resource.time_model!r}"
        )
    return LlmSolver(
        worker,
        config,
        llm,
        suite,
        resource,
        emit,
        cache,
        loop,
        window_min_s,
        window_max_s,
        n_others,
        tm,
        condition,
    )

"""A scripted stand-in model for the LLM solver's tool loop, served by `FakeOpenAIServer`.

It reads the conversation the solver sent (a pure function of the request body, so the cache
and replay behave as with a real deterministic model) and picks the next tool the way a careful
agent would: outside a window it requests one; inside it observes the reference, writes the
known-good reconstruction of the task (the oracle fixtures), compiles, and releases as finished.
A step whose result was an error or a cut-off is tried again. Knobs inject bad behaviour.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mbb.agents.oracle import DEFAULT_ORACLE_DIR
from mbb.testing.testserver import Reply, declaring_responder

_TASK = re.compile(r"^Task (\S+) \(subrun (\d+)\)", re.M)
_WORKER = re.compile(r"You are the solver of worker (\S+)\.")


@dataclass
class SolverScript:
    request_s: int = 60
    oracle_dir: Path = DEFAULT_ORACLE_DIR
    memory_first: bool = True  # a note before the first request (a second planning turn)
    extra_steps: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # before writing
    invalid_first: bool = False  # the first in-window answer is unusable
    never_request: bool = False  # outside a window, only ever write notes
    idle_reads: bool = False  # inside a window, read docs.txt forever (never releases)
    claim_early: bool = False  # first thing in a window: declare the task finished (it is not)
    claim_loop: bool = False  # inside a window: declare the task finished, turn after turn
    seen: list[dict[str, Any]] = field(default_factory=list)  # bodies it answered

    # --- reading the conversation -------------------------------------------------------------
    @staticmethod
    def _actions(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], str]]:
        """(tool, args, result text) for every earlier turn."""
        out = []
        for i, m in enumerate(messages):
            if m.get("role") != "assistant":
                continue
            result = messages[i + 1].get("content", "") if i + 1 < len(messages) else ""
            if m.get("tool_calls"):
                fn = m["tool_calls"][0]["function"]
                try:
                    args = json.loads(fn["arguments"])
                except json.JSONDecodeError:
                    args = {}
                out.append((fn["name"], args, result or ""))
            else:
                try:
                    data = json.loads(m.get("content") or "")
                    out.append((data.get("tool", "?"), data.get("args", {}), result or ""))
                except (json.JSONDecodeError, AttributeError):
                    out.append(("?", {}, result or ""))
        return out

    @staticmethod
    def _in_window(messages: list[dict[str, Any]]) -> bool:
        for m in reversed(messages):
            text = m.get("content") or ""
            if m.get("role") != "user" or "[arena]" not in text:
                continue
            last = max(
                (text.rfind(s), s)
                for s in (
                    "Your window has started",
                    "s left in this window",
                    "You do not hold a window",
                    "Your window is over",
                )
            )
            if last[0] >= 0:
                return last[1] in ("Your window has started", "s left in this window")
        return False

    # --- answering ----------------------------------------------------------------------------
    def _plan(self, task: str) -> list[tuple[str, dict[str, Any]]]:
        steps: list[tuple[str, dict[str, Any]]] = [("bash", {"command": "./reference --help"})]
        steps += self.extra_steps
        src = self.oracle_dir / task
        files = sorted((p for p in src.iterdir() if p.is_file()), key=lambda p: p.name)
        files.sort(key=lambda p: p.name == "compile.sh")
        steps += [("write", {"path": p.name, "text": p.read_text()}) for p in files]
        steps += [("bash", {"command": "bash compile.sh"}), ("release", {"finished": True})]
        return steps

    def next_action(self, body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        messages = body["messages"]
        task = _TASK.search(messages[1]["content"]).group(1)
        done = self._actions(messages)
        if not self._in_window(messages):
            if self.never_request:
                return "memory", {"text": f"note {len(done)}"}
            if self.memory_first and not done:
                return "memory", {"text": f"{task}: observe, write, compile, release"}
            return "request", {"seconds": self.request_s}
        in_window = [d for d in done if d[0] not in ("memory", "request")]
        if self.invalid_first and not in_window:
            return None
        if self.claim_loop:
            return "release", {"finished": True}
        if self.claim_early and not any(t == "release" for t, _, _ in done):
            return "release", {"finished": True}
        if self.idle_reads:
            return "read", {"path": "docs.txt"}
        for tool, args in self._plan(task):
            if not any(t == tool and a == args and r.startswith("ok") for t, a, r in done):
                return tool, args
        return "release", {"finished": True}

    def __call__(self, body: dict[str, Any]) -> Reply:
        system = body["messages"][0]["content"]
        if not system.startswith("You are the solver of worker"):
            if system.startswith("You are writing the solver's after-action report"):
                return Reply.completion("Solver report: observed, wrote, compiled, released.")
            return declaring_responder(body)
        self.seen.append(body)
        action = self.next_action(body)
        if action is None:
            if body.get("tools"):
                return Reply.tool_call("rm_rf", "{}")
            return Reply.completion("I will now carefully think about it.")
        tool, args = action
        if body.get("tools"):
            return Reply.tool_call(tool, json.dumps(args))
        return Reply.json({"tool": tool, "args": args})


def worker_of(body: dict[str, Any]) -> str:
    m = _WORKER.search(body["messages"][0]["content"])
    return m.group(1) if m else "?"

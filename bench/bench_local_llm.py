"""Where the real-model test's time goes: prompt tokens evaluated vs reused per request.

Runs the negotiator real-model test's live run (2 LLM negotiators, one round, one conversation
turn, answers capped at 128 tokens, sampling seed 0: `tests/llm/test_local_llm.py`) against
llama-cpp-python's server with SmolLM2-135M, started as `mbb.llm.local` starts it, but inside a
wrapper that times, per request, what the server does: the prompt tokens it evaluates (the rest
are reused from the live KV cache or a restored RAM state), the time of that prompt evaluation,
of decoding, of saving and restoring whole-context states, and the bytes of each state.

These counts are load-independent; wall times are not (the host is shared), so each timing is
printed with the 1-minute load average before and after.

Measured (2026-12-01, shared 2-core host): 13 requests, 30,257 prompt tokens, 4,597 evaluated
(15 %), 1,364 decoded, in every run of one process with its RAM state cache. `--previous`
(logits_all on): 121-168 s at load 2-4.6, of which 15-17 s saving and 8-10 s restoring states
(350-640 MB of logits per save). Default (logits_all off): 83-127 s at load 1.5-4, 3-4 s saving
and 2-3 s restoring; at load 1.5, 26 s prompt evaluation, 41 s decoding, 8 s sampling.
`--slots 2`: 6,090 evaluated, 95-162 s at load 2.8-4. Quiet host (load 1.1-1.4, after the rules
registry: 32,506 prompt tokens, 4,417 evaluated, 1,406 decoded): 82.5-83.1 s over 3 runs.

Usage: python bench/bench_local_llm.py [--previous] [--slots N] [--set KEY=VALUE ...] [--repeat N]
    --previous                # the server as mbb ran it before (logits_all, 2 GiB RAM cache)
    --set logits_all=true     # a server setting to override (as `--KEY VALUE` on its command line)
Needs the local model (`mbb local-llm --check`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MARK = "MBB_TIMING "
# Long enough that no request times out on a loaded host: a retry would change the requests made
TIMEOUT_S = 3600
# The server as mbb ran it before: one process (one context), the server's default
# logits_all=true, a 2 GiB RAM cache of prompt states
PREVIOUS = {
    "logits_all": "true",
    "cache": "true",
    "cache_type": "ram",
    "cache_size": str(2 * 1024**3),
}


def serve_timed(argv: list[str]) -> None:
    """Run llama-cpp-python's server with its Llama methods wrapped to print one JSON line per
    request (prefixed by MARK) to stderr: the server's own numbers, nothing estimated."""
    import llama_cpp
    from llama_cpp import Llama

    current: dict[str, Any] = {}

    def timed(name: str, fn: Any) -> Any:
        def wrapper(self: Llama, *a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            out = fn(self, *a, **kw)
            current.setdefault(name + "_s", 0.0)
            current[name + "_s"] += time.perf_counter() - t
            if name == "save_state":
                current["state_bytes"] = out.llama_state_size
                current["scores_bytes"] = out.scores.nbytes
            return out

        return wrapper

    orig_eval = Llama.eval

    def eval_(self: Llama, tokens: Any) -> None:
        t = time.perf_counter()
        orig_eval(self, tokens)
        dt = time.perf_counter() - t
        if "prompt_eval_tokens" not in current:  # generate()'s first eval: the prompt's rest
            current["prompt_eval_tokens"] = len(tokens)
            current["prompt_eval_s"] = dt
            current["n_past_before"] = self.n_tokens - len(tokens)
        else:
            current["decode_tokens"] = current.get("decode_tokens", 0) + len(tokens)
            current["decode_s"] = current.get("decode_s", 0.0) + dt

    orig_create = Llama.create_completion

    def create(self: Llama, prompt: Any, *a: Any, **kw: Any) -> Any:
        current.clear()
        t = time.perf_counter()
        current["prompt_tokens"] = len(prompt) if isinstance(prompt, list) else None
        current["grammar"] = kw.get("grammar") is not None
        out = orig_create(self, prompt, *a, **kw)
        current["total_s"] = time.perf_counter() - t
        current["ended"] = time.time()
        if self.cache is not None:
            current["cache_states"] = len(getattr(self.cache, "cache_state", {}))
        print(MARK + json.dumps(current), file=sys.stderr, flush=True)
        return out

    Llama.eval = eval_  # type: ignore[method-assign]
    Llama.create_completion = create  # type: ignore[method-assign]
    Llama.save_state = timed("save_state", Llama.save_state)  # type: ignore[method-assign]
    Llama.load_state = timed("load_state", Llama.load_state)  # type: ignore[method-assign]
    del llama_cpp
    sys.argv = ["llama_cpp.server", *argv]
    from llama_cpp.server.__main__ import main

    main()


def load_avg() -> float:
    return os.getloadavg()[0]


def run_once(overrides: dict[str, str], log_path: Path, slots: int) -> dict[str, Any]:
    """One live run of the test's condition; returns its wall time, load and per-request rows."""
    from mbb.batch.build import load_params, run_condition
    from mbb.llm import local

    original = local._server_command

    def command(port: int, alias: str, threads: int) -> list[str]:
        cmd = original(port, alias, threads)
        assert cmd[1:3] == ["-m", "llama_cpp.server"]
        args = cmd[3:]
        for key, value in overrides.items():
            flag = f"--{key}"
            if flag in args:
                i = args.index(flag)
                args[i + 1] = value
            else:
                args += [flag, value]
        return [sys.executable, str(Path(__file__).resolve()), "--serve", *args]

    local._server_command = command  # type: ignore[assignment]
    captured: list[str] = []
    orig_tmp = tempfile.NamedTemporaryFile

    def keep_log(*a: Any, **kw: Any) -> Any:
        f = orig_tmp(*a, **kw)
        if kw.get("prefix") == "llama-server-":
            captured.append(f.name)
        return f

    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    over = {
        "name": "local_llm_test",
        "subruns": 1,
        "workers": {"count": 2, "model": "local"},
        "negotiation": {"max_turns": 1},
        "time": {"max_rounds_per_subrun": 1},
        "llm": {"cache": "off"},
    }
    with tempfile.TemporaryDirectory() as tmp:
        local.tempfile.NamedTemporaryFile = keep_log  # type: ignore[attr-defined]
        try:
            load0 = load_avg()
            with local.llama_server(port, slots=slots) as url:
                over["models"] = {
                    "local": {
                        "base_url": url,
                        "max_tokens": 128,
                        "max_retries": 1,
                        "timeout_s": TIMEOUT_S,
                        "extra_body": {"seed": 0},
                    }
                }
                cond = load_params(ROOT / "params" / "local_llm.yaml", over)
                t0 = time.monotonic()
                result = run_condition(cond, 0, Path(tmp) / "live")
                wall = time.monotonic() - t0
                logs = [Path(name).read_text() for name in captured]
            load1 = load_avg()
        finally:
            local.tempfile.NamedTemporaryFile = orig_tmp  # type: ignore[attr-defined]
            local._server_command = original  # type: ignore[assignment]
    log_path.write_text("".join(f"=== server {i}\n{text}" for i, text in enumerate(logs)))
    rows = sorted(
        (
            {**json.loads(line[len(MARK) :]), "server": i}
            for i, text in enumerate(logs)
            for line in text.splitlines()
            if line.startswith(MARK)
        ),
        key=lambda r: r["ended"],
    )
    events = [json.loads(x) for x in result.log.lines]
    calls = [e for e in events if e["kind"] == "llm_call" and not e["cache_hit"]]
    return {"wall_s": wall, "load": (load0, load1), "rows": rows, "calls": calls}


def report(run: dict[str, Any]) -> None:
    rows = run["rows"]
    print(
        f"{'#':>2} {'srv':>3} {'prompt':>6} {'eval':>5} {'reused':>6} {'eval s':>6} {'dec tok':>7} "
        f"{'dec s':>6} {'save s':>6} {'load s':>6} {'state MB':>8} {'scores MB':>9} {'total s':>7}"
    )
    for i, r in enumerate(rows, 1):
        prompt = r.get("prompt_tokens") or 0
        ev = r.get("prompt_eval_tokens", 0)
        print(
            f"{i:>2} {r['server']:>3} {prompt:>6} {ev:>5} {prompt - ev:>6} "
            f"{r.get('prompt_eval_s', 0):>6.2f} "
            f"{r.get('decode_tokens', 0):>7} {r.get('decode_s', 0):>6.2f} "
            f"{r.get('save_state_s', 0):>6.2f} {r.get('load_state_s', 0):>6.2f} "
            f"{r.get('state_bytes', 0) / 1e6:>8.1f} {r.get('scores_bytes', 0) / 1e6:>9.1f} "
            f"{r.get('total_s', 0):>7.2f}"
        )
    prompt = sum(r.get("prompt_tokens") or 0 for r in rows)
    ev = sum(r.get("prompt_eval_tokens", 0) for r in rows)

    def total(key: str) -> float:
        return sum(r.get(key, 0) for r in rows)

    known = sum(total(k) for k in ("prompt_eval_s", "decode_s", "save_state_s", "load_state_s"))

    print(
        f"requests {len(rows)} (llm_call events {len(run['calls'])}); prompt tokens {prompt}, "
        f"evaluated {ev} ({ev / max(prompt, 1):.0%}), reused {prompt - ev}; completion tokens "
        f"{total('decode_tokens'):.0f}\nserver time {total('total_s'):.1f} s: prompt eval "
        f"{total('prompt_eval_s'):.1f} s, decode {total('decode_s'):.1f} s, state save "
        f"{total('save_state_s'):.1f} s, state load {total('load_state_s'):.1f} s, other "
        f"(sampling, grammar, tokenizing) {total('total_s') - known:.1f} s\n"
        f"live run wall {run['wall_s']:.1f} s, 1-min load average {run['load'][0]:.2f} before, "
        f"{run['load'][1]:.2f} after"
    )


def local_slots() -> int:
    from mbb.llm import local

    return getattr(local, "DEFAULT_SLOTS", 1)  # 1: a version of mbb with one server process


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:
        serve_timed(argv[1:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], help="server setting KEY=VALUE")
    ap.add_argument("--slots", type=int, default=None, help="server processes (default: mbb's)")
    ap.add_argument(
        "--previous", action="store_true", help="the previous server setup (1 slot, RAM cache)"
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs, back to back")
    ap.add_argument("--log", default="/tmp/bench_local_llm.log", help="server log of the last run")
    args = ap.parse_args(argv)
    overrides = dict(kv.split("=", 1) for kv in args.set)
    if args.previous:
        overrides = {**PREVIOUS, **overrides}
        args.slots = args.slots or 1
    walls = []
    for _ in range(args.repeat):
        run = run_once(overrides, Path(args.log), args.slots or local_slots())
        report(run)
        walls.append(run["wall_s"])
    if len(walls) > 1:
        print(f"wall {min(walls):.1f}-{max(walls):.1f} s (median {statistics.median(walls):.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

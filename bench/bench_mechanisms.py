"""Benchmark the centralized mechanisms (not a test), side by side with a SimPy model.

A 100-worker, 4-subrun condition (base otherwise) runs under each centralized mechanism in
mbb's arena. The same FCFS and EDF workload — the tasks and work recorded by mbb's run, the
same private deadlines, window bounds, request rule and modeled solver (efficiency and per-window
set-up drawn from the same `worker_rng` streams) — is also written as an idiomatic SimPy model:
one process per worker and a `Resource` (FCFS) or `PriorityResource` keyed by deadline (EDF);
a waiting request races a timeout at the deadline. The SimPy model is timed twice: bare
(outcomes kept in a list) and emitting the same typed events through
`mbb.core.eventlog.EventLog.emit`,
which validates each one (mbb's arena writes its own events with `EventLog.record`: the same
lines, not re-validated; mbb also records rounds, schedules, dropped windows, after-action
reports and scores, which the SimPy model does not). Its outcomes are checked against mbb's
(identical completions and terminations per worker and subrun): SimPy's continuous FCFS equals
mbb's round-batched FCFS, and with the base condition's equal deadlines so does its EDF.

Usage: python bench/bench_mechanisms.py [--workers 100] [--subruns 4] [--repeat 7] [--seed 0]
Needs the `bench` extra (simpy). Target (issue 7): mbb at least as fast as the SimPy model.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable

import simpy

from mbb.agents.backends import worker_rng
from mbb.agents.modeled import STAGES
from mbb.batch.build import load_params, run_condition
from mbb.core import eventlog
from mbb.core import events as ev
from mbb.core.paths import params_file
from mbb.params import Condition
from mbb.protocol.scheduling.centralized import CENTRALIZED

SETUP_MEAN_S = 6.0  # mbb.agents.modeled.ModeledSolver.setup_mean_s


def condition(kind: str, workers: int, subruns: int) -> Condition:
    return load_params(
        params_file("base"),
        {
            "name": f"bench_{kind}",
            "subruns": subruns,
            "workers": {"count": workers},
            "mechanism": {"kind": kind},
        },
    )


def stage_need_s(work_s: float, done: float, eff: float, min_s: int) -> float:
    """Mirror of ModeledSolver.stage_need_s: a window for the current stage (observe,
    implement, compile, verify), plus the next one when the current is nearly done."""
    acc = left = 0.0
    for _, share in STAGES:
        acc += share * work_s
        if done < acc - 1e-9:
            left = acc - done
            if left < 0.5 * min_s * eff:
                continue
            break
    return left / eff + SETUP_MEAN_S


def workload(lines: list[str]) -> dict[int, list[tuple[str, int, float, float]]]:
    """subrun -> [(worker, index, work_s, deadline_s)] from a run's subrun_started events."""
    out = {}
    for line in lines:
        r = json.loads(line)
        if r["kind"] == "subrun_started":
            out[r["subrun"]] = [
                (w["worker"], i, w["work_s"], w["deadline_s"]) for i, w in enumerate(r["workers"])
            ]
    return out


def simpy_model(cond: Condition, seed: int, work: dict, policy: str, log: eventlog.EventLog | None):
    """FCFS/EDF on one machine in SimPy; returns {(subrun, worker): outcome}."""
    lo, hi = cond.windows.min_s, cond.windows.max_s
    rngs = {i: worker_rng(seed, i, 1) for _, i, _, _ in work[1]}
    eff = {i: float(rng.uniform(0.8, 1.0)) for i, rng in rngs.items()}
    outcome: dict[tuple[int, str], str] = {}

    def emit(cls, worker=None, t=0.0, **kw):
        if log is not None:
            log.t = t
            log.emit(cls, worker, **kw)

    emit(ev.RunStarted, condition=cond.name, seed=seed, params={}, workers=[], provenance={})
    for subrun, jobs in sorted(work.items()):
        env = simpy.Environment()
        res = simpy.Resource(env, 1) if policy == "fcfs" else simpy.PriorityResource(env, 1)
        if log is not None:
            log.subrun = subrun
        emit(
            ev.SubrunStarted,
            workers=[
                ev.WorkerAtStart(
                    worker=w, task="-", work_s=ws, budget=0, deadline_s=d, scratch_chars=0
                )
                for w, _, ws, d in jobs
            ],
        )

        def worker(
            w: str,
            i: int,
            work_s: float,
            deadline: float,
            subrun: int = subrun,
            env: simpy.Environment = env,
            res: simpy.Resource = res,
        ):
            done = 0.0
            rng = rngs[i]
            while True:
                need = stage_need_s(work_s, done, eff[i], lo)
                dur = max(lo, min(hi, math.ceil(need)))
                emit(ev.Requested, w, env.now, duration=dur)
                req = res.request() if policy == "fcfs" else res.request(priority=deadline)
                got = yield req | env.timeout(max(0.0, deadline - env.now))
                if req not in got:
                    req.cancel()
                    outcome[(subrun, w)] = "terminated"
                    emit(ev.Terminated, w, env.now, deadline_s=deadline, progress=done / work_s)
                    return
                start = env.now
                hard_end = min(start + dur, deadline)
                length = hard_end - start
                setup = float(rng.uniform(0.5, 1.5)) * SETUP_MEAN_S
                useful = max(0.0, length - setup) * eff[i]
                emit(ev.WindowStarted, w, start, position=1, allocation=dur, price=0)
                if work_s - done <= useful:
                    used = min(length, setup + (work_s - done) / eff[i])
                    done = work_s
                else:
                    used, done = length, done + useful
                yield env.timeout(used)
                res.release(req)
                reason = (
                    "completed"
                    if done >= work_s
                    else ("deadline" if env.now >= deadline - 1e-9 else "allocation")
                )
                emit(
                    ev.WindowEnded,
                    w,
                    env.now,
                    position=1,
                    start=start,
                    used=used,
                    allocation=dur,
                    reason=reason,
                    progress=done / work_s,
                )
                if reason == "completed":
                    outcome[(subrun, w)] = "completed"
                    emit(ev.Completed, w, env.now, work_s=work_s)
                    return
                if reason == "deadline":
                    outcome[(subrun, w)] = "terminated"
                    emit(ev.Terminated, w, env.now, deadline_s=deadline, progress=done / work_s)
                    return

        for w, i, work_s, deadline in jobs:
            env.process(worker(w, i, work_s, deadline))
        env.run()
        emit(ev.SubrunEnded, t=env.now, rounds=0, reason="all_done")
        for w, *_ in jobs:
            emit(
                ev.Evaluated,
                w,
                env.now,
                task="-",
                score=0.0,
                passed=0,
                total=0,
                resolved=False,
                almost_resolved=False,
                progress=0.0,
                outcome=outcome.get((subrun, w), "terminated"),
            )
    emit(ev.RunEnded, status="completed")
    return outcome


def mbb_outcomes(lines: list[str]) -> dict[tuple[int, str], str]:
    return {
        (r["subrun"], r["worker"]): r["outcome"]
        for r in map(json.loads, lines)
        if r["kind"] == "evaluation"
    }


def timed(fn: Callable[[], object], repeat: int) -> float:
    """Best of `repeat` (ms): on a shared machine the minimum is the least noisy estimate."""
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=100)
    ap.add_argument("--subruns", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    seed = args.seed
    rows = []
    for kind in CENTRALIZED:
        cond = condition(kind, args.workers, args.subruns)
        lines = run_condition(cond, seed).log.lines
        ms = timed(lambda cond=cond: run_condition(cond, seed), args.repeat)
        row = {"mechanism": kind, "mbb_ms": ms, "events": len(lines)}
        if kind in ("fcfs", "edf"):
            work = workload(lines)
            ref = simpy_model(cond, seed, work, kind, None)
            same = ref == mbb_outcomes(lines)
            row["simpy_bare_ms"] = timed(
                lambda cond=cond, work=work, kind=kind: simpy_model(cond, seed, work, kind, None),
                args.repeat,
            )
            row["simpy_events_ms"] = timed(
                lambda cond=cond, work=work, kind=kind: simpy_model(
                    cond, seed, work, kind, eventlog.EventLog("simpy")
                ),
                args.repeat,
            )
            row["same_outcomes"] = same
        rows.append(row)
    print(
        f"{args.workers} workers x {args.subruns} subruns, seed {seed}, best of "
        f"{args.repeat} (ms per run; events kept in memory)"
    )
    head = (
        f"{'mechanism':<20}{'mbb ms':>9}{'events':>8}{'SimPy bare':>12}{'SimPy+events':>14}"
        f"{'same outcomes':>15}{'mbb/SimPy+ev':>14}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        sb = f"{r['simpy_bare_ms']:.1f}" if "simpy_bare_ms" in r else "-"
        se = f"{r['simpy_events_ms']:.1f}" if "simpy_events_ms" in r else "-"
        same = str(r.get("same_outcomes", "-"))
        ratio = f"{r['mbb_ms'] / r['simpy_events_ms']:.2f}" if "simpy_events_ms" in r else "-"
        print(
            f"{r['mechanism']:<20}{r['mbb_ms']:>9.1f}{r['events']:>8}{sb:>12}{se:>14}"
            f"{same:>15}{ratio:>14}"
        )


if __name__ == "__main__":
    main()

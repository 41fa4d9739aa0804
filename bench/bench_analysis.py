"""Benchmark the analyses (not a test): evidence classifier plus every measure over a batch.

Usage:
    mbb run params/base.yaml --runs 1500 --out DIR     # untimed: generate the runs first
    python bench/bench_analysis.py DIR                 # timed: load tables + all analyses
Targets (issue 5): <= 60 s and <= 4 GB peak memory (RSS) for 1,500 base runs.
Timed: reading the parquet tables and each run's run_started line, the evidence classifier,
P/R/F1 against the scripted ground truth, transmission, institutions, every paper measure,
linguistic drift and the token audit. Prints one line per step and the totals.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import polars as pl

from mbb import analysis as A
from mbb.core.tables import load_tables


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path, help="output folder of `mbb run` (run dirs + tables/)")
    args = ap.parse_args()
    if not (args.out / "tables").is_dir():
        sys.exit(
            f"{args.out}/tables not found: run `mbb run params/base.yaml --runs 1500 "
            f"--out {args.out}` first"
        )
    steps: list[tuple[str, float, int]] = []
    t_start = time.perf_counter()

    def step(name, fn):
        t0 = time.perf_counter()
        out = fn()
        rows = out.height if isinstance(out, pl.DataFrame) else 0
        steps.append((name, time.perf_counter() - t0, rows))
        return out

    tables = step("load parquet tables", lambda: load_tables(args.out / "tables"))
    run_dirs = sorted(p for p in args.out.iterdir() if (p / "events.jsonl").exists())
    tables = step(
        "run info (run_started lines)", lambda: A.with_run_info(tables, run_dirs=run_dirs)
    )
    ev = step("evidence classifier", lambda: A.classify_evidence(tables))
    up = step("utterance labels", lambda: A.utterance_predictions(ev))
    wr = step("worker-round labels", lambda: A.worker_round_predictions(ev))
    prf = step(
        "P/R/F1 vs ground truth", lambda: A.prf_table(A.ground_truth(tables), up, ["run_id", "seq"])
    )
    for name, fn in [
        ("commitments", lambda: A.commitments(tables)),
        ("rule lifecycle", lambda: A.rule_lifecycle(tables, ev)),
        ("transmission rates", lambda: A.transmission_rates(tables, ev)),
        ("institutions", lambda: A.institutions(tables, wr)),
        ("pair institutions", lambda: A.pair_institutions(tables, ev)),
        ("behaviour prevalence", lambda: A.behaviour_prevalence(tables, wr)),
        ("direct messages", lambda: A.direct_message_use(tables)),
        ("rule dynamics", lambda: A.rule_dynamics(tables, ev)),
        ("urgency premium", lambda: A.urgency_premium(tables)),
        ("rich worker", lambda: A.rich_worker(tables)),
        ("contested win rates", lambda: A.contested_win_rates(tables)),
        ("relational vs bid", lambda: A.relational_vs_bid(tables, wr)),
        ("mean bid by subrun", lambda: A.mean_bid(tables)),
        ("structural metrics", lambda: A.structural_metrics(tables)),
        ("outcomes", lambda: A.outcomes(tables, ["condition", "subrun"])),
        ("behaviour drift (subrun)", lambda: A.behaviour_drift(tables, wr)),
        ("behaviour drift (round)", lambda: A.behaviour_drift(tables, wr, level="round")),
        ("drift tests", lambda: A.drift_tests(tables, wr)),
        ("linguistic drift", lambda: A.linguistic_drift(tables, ev)),
        ("token audit", lambda: A.token_audit(tables)),
    ]:
        step(name, fn)
    total = time.perf_counter() - t_start
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    n_utt = tables["messages"].height + tables["declarations"].height + tables["ballots"].height
    for name, secs, rows in steps:
        print(f"{name:32s} {secs:7.2f} s  {rows:>9,d} rows")
    macro = prf.filter(pl.col("category") == "macro (enacted)")["f1"].item()
    print(
        f"{len(run_dirs)} runs, {n_utt:,d} utterances, {ev.height:,d} evidence rows, "
        f"macro-F1 {macro:.3f}"
    )
    print(f"TOTAL {total:.1f} s (target <= 60 s), peak RSS {peak_gb:.2f} GB (target <= 4 GB)")


if __name__ == "__main__":
    main()

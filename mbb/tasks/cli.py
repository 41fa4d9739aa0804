"""`mbb tasks build` and `mbb tasks check`: build the real-task suite, then prove it is sound.

check: every oracle reconstruction scores 1.0, a stub (prints nothing, exits 0) and an empty
submission score ≤ 0.1, and the reference passes its own hidden tests. Exit status 1 otherwise.
The main CLI calls `add_parsers(subparsers)`; `python -m mbb.tasks.cli` works on its own too.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["STUB_COMPILE", "add_parsers", "check_suite", "main"]

STUB_COMPILE = "#!/bin/sh\nprintf '#!/bin/sh\\nexit 0\\n' > executable\nchmod +x executable\n"


def _cmd_build(args: argparse.Namespace) -> int:
    from mbb.tasks.suite import SuiteBuildError, build_suite

    try:
        suite = build_suite(args.cache, tasks=args.tasks or None, seed=args.seed)
    except SuiteBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{'task':<8} {'package':<14} {'diff':>4} {'iface':>5} {'tests':>5}  dropped")
    for t in suite.tasks.values():
        dropped = ", ".join(f"{k} {v}" for k, v in t.dropped.items() if v)
        print(
            f"{t.task_id:<8} {t.package:<14} {t.difficulty:>4} {t.interface_size:>5} "
            f"{t.n_tests:>5}  {dropped}"
        )
    print(
        f"{len(suite.tasks)} tasks in {suite.cache_dir} ({len(suite.rebuilt)} rebuilt, "
        f"{suite.build_s:.1f}s)"
    )
    return 0


def check_suite(
    suite: Any, oracle_dir: Path, tasks: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """One row per task: oracle, stub, empty and reference scores, and whether all is well."""
    from mbb.resource import reaper
    from mbb.tasks.evaluator import evaluate_reference, evaluate_submission

    rows = []
    for tid in tasks or suite.task_ids:
        task = suite[tid]
        with tempfile.TemporaryDirectory(prefix=reaper.temp_prefix("check")) as d:
            base = Path(d)
            oracle = base / "oracle"
            src = oracle_dir / tid
            if src.is_dir():
                shutil.copytree(src, oracle)
            else:
                oracle.mkdir()
            stub = base / "stub"
            stub.mkdir()
            (stub / "compile.sh").write_text(STUB_COMPILE)
            empty = base / "empty"
            empty.mkdir()
            o = evaluate_submission(task, oracle)
            s = evaluate_submission(task, stub)
            e = evaluate_submission(task, empty)
        r = evaluate_reference(task)
        ok = (
            o.result.score == 1.0
            and s.result.score <= 0.1
            and e.result.score <= 0.1
            and r.result.score == 1.0
        )
        rows.append(
            {
                "task": tid,
                "tests": task.n_tests,
                "oracle": o.result.score,
                "stub": s.result.score,
                "empty": e.result.score,
                "reference": r.result.score,
                "eval_s": round(o.wall_s, 2),
                "ok": ok,
            }
        )
    return rows


def _cmd_check(args: argparse.Namespace) -> int:
    from mbb.agents.oracle import DEFAULT_ORACLE_DIR
    from mbb.tasks.suite import SuiteBuildError, build_suite

    try:
        suite = build_suite(args.cache, tasks=args.tasks or None, seed=args.seed)
    except SuiteBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    oracle_dir = Path(args.oracle_dir) if args.oracle_dir else DEFAULT_ORACLE_DIR
    rows = check_suite(suite, oracle_dir, args.tasks or None)
    head = (
        f"{'task':<8} {'tests':>5} {'oracle':>6} {'stub':>5} {'empty':>5} {'ref':>5} {'eval_s':>6}"
    )
    print(head + "  ok")
    for r in rows:
        print(
            f"{r['task']:<8} {r['tests']:>5} {r['oracle']:>6.2f} {r['stub']:>5.2f} "
            f"{r['empty']:>5.2f} {r['reference']:>5.2f} {r['eval_s']:>6.2f}  "
            f"{'yes' if r['ok'] else 'NO'}"
        )
    bad = [r["task"] for r in rows if not r["ok"]]
    print(f"{len(rows) - len(bad)}/{len(rows)} tasks sound" + (f"; failing: {bad}" if bad else ""))
    return 1 if bad else 0


def add_parsers(subparsers: Any) -> None:
    """Add `tasks build` and `tasks check` to the main CLI's subparsers."""
    p = subparsers.add_parser("tasks", help="the real-task suite (build, check)")
    sub = p.add_subparsers(dest="tasks_command", required=True)
    for name, func, text in (
        ("build", _cmd_build, "build (or load from cache) the suite: docs, references, tests"),
        ("check", _cmd_check, "oracle = 1.0, stub/empty <= 0.1, reference passes its tests"),
    ):
        s = sub.add_parser(name, help=text)
        s.add_argument(
            "--cache", default=None, help="cache dir (default $MBB_TASK_CACHE or ~/.cache)"
        )
        s.add_argument("--tasks", nargs="*", default=None, help="task ids (default: all)")
        s.add_argument("--seed", type=int, default=0, help="test-generation seed")
        if name == "check":
            s.add_argument("--oracle-dir", default=None, help="oracle reconstructions folder")
        s.set_defaults(func=func)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mbb")
    add_parsers(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())

"""Proving the real-task suite sound: every oracle reconstruction scores 1.0, a stub (prints
nothing, exits 0) and an empty submission score <= 0.1, and the reference passes its own hidden
tests (`mbb tasks check` prints it)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["STUB_COMPILE", "check_suite"]

STUB_COMPILE = "#!/bin/sh\nprintf '#!/bin/sh\\nexit 0\\n' > executable\nchmod +x executable\n"


def check_suite(
    suite: Any, oracle_dir: Path, tasks: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """One row per task: oracle, stub, empty and reference scores, and whether all is well."""
    from mbb.resource import reaper
    from mbb.tasks.evaluator import evaluate_reference, evaluate_submission

    rows = []
    for tid in tasks or suite.task_ids:
        task = suite[tid]
        with reaper.temp_directory("check") as d:
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

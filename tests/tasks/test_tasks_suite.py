"""The suite: shape of every task, and the check that makes it trustworthy (oracle 1.0, stub ≤ 0.1,
reference passes its own tests)."""

from __future__ import annotations

import asyncio
import os
import random
import stat
from pathlib import Path

import pytest

from mbb.agents.oracle import make_oracle_solver
from mbb.core.agent_api import TaskAssignment
from mbb.tasks import suite as suite_mod
from mbb.tasks.evaluator import evaluate_reference, evaluate_submission
from mbb.tasks.specs import TASK_SPECS
from mbb.tasks.suite import MIN_TESTS, SuiteBuildError, build_suite

TASKS = sorted(TASK_SPECS)
STUB = "#!/bin/sh\nprintf '#!/bin/sh\\nexit 0\\n' > executable\nchmod +x executable\n"


def test_suite_has_at_least_12_real_tasks(suite):
    assert len(suite.tasks) >= 12
    assert {t.package for t in suite.tasks.values()} >= {"coreutils", "util-linux", "bsdextrautils"}
    assert len({t.difficulty for t in suite.tasks.values()}) >= 3  # a spread of difficulty


@pytest.mark.parametrize("task_id", TASKS)
def test_task_shape(suite, task_id):
    t = suite[task_id]
    assert t.n_tests >= MIN_TESTS
    tests = t.hidden_tests()
    assert len(tests) == t.n_tests
    assert len({(x.args, x.stdin) for x in tests}) == len(tests)  # no duplicates
    assert all(not (x.stdout == "" and x.exit_code == 0) for x in tests)  # stub-passing dropped
    assert "Usage" in t.docs or "usage" in t.docs
    assert stat.S_IMODE(os.stat(t.reference).st_mode) == 0o111
    assert t.reference.read_bytes() == Path(t.original).read_bytes()
    assert 1 <= t.difficulty <= 3


@pytest.mark.parametrize("task_id", TASKS)
def test_oracle_scores_1_stub_and_empty_score_0_reference_passes(suite, task_id, env, tmp_path):
    task = suite[task_id]
    solver = make_oracle_solver(
        "W1",
        suite=suite,
        resource=env.resource,
        emit=env.log.emit,
        time_model="virtual",
        rng=random.Random(0),
    )

    async def go():
        await solver.start_subrun(TaskAssignment(task_id, 0.0, 0), None)
        out = await solver.run_window(env.grant("W1", 300))
        return out, await solver.evaluate()

    outcome, result = asyncio.run(go())
    assert outcome.completed and solver.done
    assert result.score == 1.0 and result.resolved and result.total == task.n_tests
    assert len(env.events("test_result")) == task.n_tests

    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "compile.sh").write_text(STUB)
    assert evaluate_submission(task, stub).result.score <= 0.1
    empty = tmp_path / "empty"
    empty.mkdir()
    ev = evaluate_submission(task, empty)
    assert ev.result.score == 0.0 and ev.result.passed == 0 and not ev.compiled
    assert evaluate_reference(task).result.score == 1.0


def test_build_is_idempotent_and_cached(tmp_path):
    first = build_suite(tmp_path / "c", tasks=["rev", "head"])
    assert set(first.rebuilt) == {"rev", "head"}
    again = build_suite(tmp_path / "c", tasks=["rev", "head"])
    assert again.rebuilt == ()
    assert [x.stdout for x in again["rev"].hidden_tests()] == [
        x.stdout for x in first["rev"].hidden_tests()
    ]
    assert (tmp_path / "c" / ".gitignore").read_text() == "*\n"


def test_seeded_generation_is_deterministic():
    for spec in TASK_SPECS.values():
        a = suite_mod._candidates(spec, 7, 20)[0]
        b = suite_mod._candidates(spec, 7, 20)[0]
        assert a == b


def test_missing_reference_program_names_apt_get(tmp_path, monkeypatch):
    spec = TASK_SPECS["rev"]
    monkeypatch.setitem(
        TASK_SPECS,
        "rev",
        type(spec)(
            **{**{f: getattr(spec, f) for f in spec.__slots__}, "program": "no-such-program-xyz"}
        ),
    )
    with pytest.raises(SuiteBuildError, match=r"apt-get install -y .*bsdextrautils"):
        build_suite(tmp_path / "c", tasks=["rev"])


def test_required_packages_declared():
    pkgs = set(suite_mod.REQUIRED_DEBIAN_PACKAGES)
    assert {s.package for s in TASK_SPECS.values()} <= pkgs
    assert "bubblewrap" in pkgs

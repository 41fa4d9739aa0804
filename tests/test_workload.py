"""The workload as an experimental control (mbb.tasks.workload) and seat-balanced personas."""

from __future__ import annotations

import json
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

from mbb.batch.build import load_params, run_condition
from mbb.core.paths import PROJECT_ROOT
from mbb.params import DEFAULT_ROSTER, ParamsError
from mbb.tasks import workload as W
from mbb.tasks.specs import TASK_SPECS


def params(name: str, overrides=None):
    return load_params(PROJECT_ROOT / "params" / f"{name}.yaml", overrides)


def subrun_starts(cond, seeds):
    """{seed: {subrun: {worker: (task, work_s)}}} from real runs of the arena."""
    out = {}
    for seed in seeds:
        lines = run_condition(cond, seed).log.by_kind["subrun_started"]
        out[seed] = {
            (d := json.loads(line))["subrun"]: {
                w["worker"]: (w["task"], w["work_s"]) for w in d["workers"]
            }
            for line in lines
        }
    return out


def test_base_varies_tasks_and_balances_demand_over_subruns():
    starts = subrun_starts(params("base"), range(20))
    first = Counter(s[1]["W1"][0] for s in starts.values())
    assert len(first) >= 3, first
    demand = [
        np.mean([sum(w for _, w in s[k].values()) for s in starts.values()]) for k in range(1, 5)
    ]
    assert (max(demand) - min(demand)) / min(demand) <= 0.2, demand


def test_rotate_is_the_papers_fixed_rotation():
    starts = subrun_starts(
        params("base", {"tasks": {"assignment": "rotate", "load": None}}), (0, 7)
    )
    for s in starts.values():
        assert [s[k]["W1"][0] for k in range(1, 5)] == ["rev", "fold", "column", "wc"]


@pytest.mark.parametrize("seed", [0, 1, 2, 13])
def test_balanced_slots_form_a_latin_square(seed):
    n = 5
    square = [W.balanced_slots(seed, s, n) for s in range(1, n + 1)]
    for row in square:  # every subrun holds every slot once
        assert sorted(row) == list(range(n))
    for seat in range(n):  # every seat meets every slot once over n subruns
        assert sorted(r[seat] for r in square) == list(range(n))


def test_the_design_changes_with_the_seed():
    designs = {tuple(W.balanced_slots(seed, 1, 5)) for seed in range(10)}
    assert len(designs) >= 4


def test_every_subrun_draws_one_task_per_difficulty_tier():
    cond = params("base")
    catalog = W.catalog_for(cond)
    tiers = W.tiers_of(catalog, 5)
    tier_of = {t.task_id: j for j, tier in enumerate(tiers) for t in tier}
    rng = np.random.default_rng(0)
    ids = [f"W{i + 1}" for i in range(5)]
    for seed in range(5):
        for subrun in range(1, 5):
            got = W.assign_tasks(cond, seed, subrun, ids, rng)
            assert sorted(tier_of[t] for t, _ in got.values()) == list(range(5))


def test_the_same_seed_gives_the_same_workload_in_every_condition():
    a = subrun_starts(params("base"), (3, 4))
    b = subrun_starts(params("urgent_worker"), (3, 4))
    assert a == b


@pytest.mark.parametrize("load", [0.5, 0.9, 1.4])
def test_load_sets_the_expected_demand(load):
    cond = params("base", {"tasks": {"load": load}})
    capacity = 60.0 * cond.deadline.minutes
    assert W.expected_demand_s(cond, 5) == pytest.approx(load * capacity)
    ids = [f"W{i + 1}" for i in range(5)]
    totals = [
        sum(w for _, w in W.assign_tasks(cond, seed, 1 + seed % 4, ids, rng).values())
        for seed in range(400)
        for rng in [np.random.default_rng(seed)]
    ]
    assert np.mean(totals) == pytest.approx(load * capacity, rel=0.05)


def test_load_and_work_scale_do_not_mix():
    with pytest.raises(ParamsError, match=r"tasks\.load .* or tasks\.work_scale"):
        params("base", {"tasks": {"work_scale": 2.0}})
    with pytest.raises(ParamsError, match=r"tasks\.load"):
        params("base", {"tasks": {"load": 0}})


def test_real_tasks_are_balanced_by_difficulty_rating():
    cond = params("real_tasks_oracle")
    suite = SimpleNamespace(task_ids=sorted(TASK_SPECS))
    ids = [f"W{i + 1}" for i in range(5)]
    rng = np.random.default_rng(0)
    profiles = set()
    for subrun in range(1, 5):
        got = W.assign_tasks(cond, 2, subrun, ids, rng, suite)
        assert all(w == 0.0 for _, w in got.values())  # a real task's work is not modeled
        profiles.add(tuple(sorted(TASK_SPECS[t].difficulty for t, _ in got.values())))
    assert len(profiles) == 1  # every subrun gets the same mix of difficulties


def test_seating_rotates_personas_by_seed():
    cond = params("base")
    seen = {cond.worker_specs(seed)[0].persona for seed in range(5)}
    assert seen == set(DEFAULT_ROSTER)
    assert [s.persona for s in cond.worker_specs(0)] == list(DEFAULT_ROSTER)
    fixed = params("base", {"workers": {"seating": "fixed"}})
    assert {fixed.worker_specs(seed)[0].persona for seed in range(5)} == {"price_first"}
    pinned = params("base", {"workers": {"overrides": {"W2": {"persona": "quitter"}}}})
    assert {pinned.worker_specs(seed)[1].persona for seed in range(5)} == {"quitter"}


def test_the_run_records_who_sat_where():
    started = json.loads(run_condition(params("base"), 2).log.by_kind["run_started"][0])
    assert started["workers"][0]["persona"] == DEFAULT_ROSTER[2]

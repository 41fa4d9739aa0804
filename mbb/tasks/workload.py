"""The workload as an experimental control: which task each worker gets in each subrun, and how
much work it is.

With the paper's fixed rotation every seed hands a seat the same task in each subrun, so task
difficulty differs systematically by subrun index and by seat, and any "across subruns" measure
mixes difficulty into behaviour. `assignment: balanced` (the default) removes that:

- The catalogue is sorted by difficulty (modeled work W, or a real task's difficulty rating) and
  cut into as many contiguous tiers as there are seats (fewer when the catalogue is smaller).
- Seats x subruns form a Latin square over tiers: in subrun s, seat p gets slot
  (rho[p] + sigma[s]) mod n, where rho is a random permutation of the seats and sigma a random
  order of the offsets, both drawn per seed. Every subrun therefore holds every tier once, and
  over n subruns every seat meets every tier once.
- Within its tier the task is drawn at random per (seed, subrun, seat), so a seat's task varies
  across seeds even in the same slot.

The design depends on the seed only, never on the condition, so a treated run and the base run
with the same seed see the same tasks (paired comparisons). Per-worker work jitter (lognormal,
sd 0.15) is drawn from the arena's stream as before.

`tasks.load` fixes the expected demand of a subrun: expected total modeled work W of the
subrun's workers divided by its capacity, the resource time before the latest deadline among
them. The catalogue's work is scaled by one factor per condition so that the expectation (over
seeds) matches; a worker's actual need is larger (efficiency 0.8-1.0 and a few seconds of
set-up per window, see `mbb.agents.modeled`). Real tasks have no modeled work, so `load`
does not apply to them (their demand shows up as used time). These are mbb's choices; the paper
fixes a rotation and does not state a load.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mbb.tasks.modeled import MODELED_TASKS

if TYPE_CHECKING:  # the condition is read, never built here
    from mbb.params import Condition

__all__ = [
    "JITTER_SD",
    "CatalogTask",
    "assign_tasks",
    "balanced_slots",
    "catalog_for",
    "expected_demand_s",
    "tiers_of",
    "work_factor",
]

JITTER_SD = 0.15  # per-worker lognormal jitter of a task's work
_DESIGN_KEY = 7_000_001  # spawn key of the design streams (independent of the arena's streams)


@dataclass(frozen=True, slots=True)
class CatalogTask:
    task_id: str
    difficulty: float  # modeled work W (seconds), or a real task's rating
    work_s: float  # modeled work W; 0.0 for a real task (its work is not known in advance)


def catalog_for(condition: Condition, real_ids: Sequence[str] | None = None) -> list[CatalogTask]:
    """The condition's catalogue in the order the fixed rotation uses (`tasks.suite` order, else
    the built-in order). `condition`: its `tasks` say modeled or real and which suite;
    `real_ids`: the built suite's task ids (real tasks only)."""
    tasks = condition.tasks
    if tasks.kind == "real":
        from mbb.tasks.specs import TASK_SPECS

        ids = list(real_ids or [])
        return [
            CatalogTask(t, float(TASK_SPECS[t].difficulty) if t in TASK_SPECS else 2.0, 0.0)
            for t in ids
        ]
    known = {t.task_id: t for t in MODELED_TASKS}
    if tasks.suite:
        unknown = [t for t in tasks.suite if t not in known]
        if unknown:
            raise ValueError(f"tasks.suite names unknown modeled tasks {unknown}")
        chosen = [known[t] for t in tasks.suite]
    else:
        chosen = list(MODELED_TASKS)
    return [CatalogTask(t.task_id, t.work_s, t.work_s) for t in chosen]


def tiers_of(catalog: Sequence[CatalogTask], n_seats: int) -> list[list[CatalogTask]]:
    """The catalogue sorted by difficulty and cut into min(n_seats, size) contiguous tiers whose
    sizes differ by at most one. `catalog`: from `catalog_for`; `n_seats`: workers present."""
    ordered = sorted(catalog, key=lambda t: (t.difficulty, t.task_id))
    k = max(1, min(n_seats, len(ordered)))
    size = len(ordered)
    return [ordered[j * size // k : (j + 1) * size // k] for j in range(k)]


def _stream(seed: int, *key: int) -> np.random.Generator:
    seq = np.random.SeedSequence(entropy=seed, spawn_key=(_DESIGN_KEY, *key))
    return np.random.default_rng(seq)


def balanced_slots(seed: int, subrun: int, n_seats: int) -> list[int]:
    """Slot 0..n-1 of each seat (by position among the present workers) in a subrun: a Latin
    square rotated by seed (a random seat permutation, and a random order of the n offsets for
    each block of n subruns). `seed`: the run's seed; `subrun`: 1-based; `n_seats`: workers
    present in the subrun."""
    if n_seats <= 0:
        return []
    g = _stream(seed, n_seats)
    rho = g.permutation(n_seats)
    block, within = divmod(subrun - 1, n_seats)
    sigma = 0
    for _ in range(block + 1):
        sigma = int(g.permutation(n_seats)[within])
    return [int((rho[p] + sigma) % n_seats) for p in range(n_seats)]


def _slot_tier(slot: int, n_seats: int, n_tiers: int) -> int:
    return slot * n_tiers // n_seats


def _mean_work_per_worker(condition: Condition, catalog: Sequence[CatalogTask], n: int) -> float:
    """Expected modeled work W of one worker's task (before jitter), over seeds."""
    if condition.tasks.assignment == "balanced":
        tiers = tiers_of(catalog, n)
        return (
            sum(
                float(np.mean([t.work_s for t in tiers[_slot_tier(s, n, len(tiers))]]))
                for s in range(n)
            )
            / n
        )
    return float(np.mean([t.work_s for t in catalog]))


def work_factor(condition: Condition, n_present: int, capacity_s: float) -> float:
    """What multiplies every modeled task's W: `tasks.work_scale`, or, with `tasks.load`, the
    factor that makes the expected demand of a subrun `load` x `capacity_s`. `condition`: its
    `tasks`; `n_present`: workers in the subrun; `capacity_s`: the subrun's resource time."""
    load = condition.tasks.load
    if load is None or condition.tasks.kind == "real":
        return condition.tasks.work_scale
    catalog = catalog_for(condition)
    per_worker = _mean_work_per_worker(condition, catalog, n_present) * math.exp(JITTER_SD**2 / 2)
    return load * capacity_s / (per_worker * n_present)


def expected_demand_s(condition: Condition, n_present: int) -> float:
    """Expected total modeled work W of a subrun with `n_present` workers (over seeds), its
    capacity being the latest deadline of the condition. `condition`: the condition;
    `n_present`: workers in the subrun."""
    catalog = catalog_for(condition)
    capacity = max(s.deadline_s for s in condition.worker_specs())
    per_worker = _mean_work_per_worker(condition, catalog, n_present) * math.exp(JITTER_SD**2 / 2)
    return per_worker * n_present * work_factor(condition, n_present, capacity)


def assign_tasks(
    condition: Condition,
    seed: int,
    subrun: int,
    present: Sequence[str],
    rng: np.random.Generator,
    suite: Any = None,
) -> dict[str, tuple[str, float]]:
    """Each present worker's (task id, modeled work W in seconds; 0.0 on a real task).

    `condition`: the run's condition (`tasks`, deadlines); `seed`: the run's seed (the design
    depends on it alone); `subrun`: 1-based; `present`: the ids of the workers taking part, in
    seat order; `rng`: the arena's stream, for
    the work jitter and the `random` rule; `suite`: the built task suite of a real-task
    condition (`mbb.tasks.suite.Suite`)."""
    ids = list(present)
    how = condition.tasks.assignment
    n = len(ids)
    if n == 0:
        return {}
    if condition.tasks.kind == "real":
        if suite is None:
            raise ValueError("a real-task condition needs the task suite to assign tasks")
        catalog = catalog_for(condition, suite.task_ids)
        if how == "balanced":
            picked = _balanced(catalog, seed, subrun, n)
            return {w: (t.task_id, 0.0) for w, t in zip(ids, picked, strict=True)}
        suite_ids = [t.task_id for t in catalog]
        out = {}
        for i, w in enumerate(ids):
            if how == "rotate":
                tid = suite_ids[(i + (subrun - 1) * n) % len(suite_ids)]
            elif how == "same":
                tid = suite_ids[(subrun - 1) % len(suite_ids)]
            else:
                tid = suite_ids[int(rng.integers(len(suite_ids)))]
            out[w] = (tid, 0.0)  # work is unknown on a real task
        return out
    catalog = catalog_for(condition)
    picks: list[tuple[CatalogTask, float]]
    if how == "random":  # a task, then its jitter, worker after worker
        picks = []
        for _ in ids:
            task = catalog[int(rng.integers(len(catalog)))]
            picks.append((task, float(rng.lognormal(0.0, JITTER_SD))))
    else:  # one call: the same draws as n scalar calls, at a fraction of the cost
        jitters = rng.lognormal(0.0, JITTER_SD, n).tolist()
        if how == "rotate":
            tasks = [catalog[(i + (subrun - 1) * n) % len(catalog)] for i in range(n)]
        elif how == "same":
            tasks = [catalog[(subrun - 1) % len(catalog)]] * n
        else:
            tasks = _balanced(catalog, seed, subrun, n)
        picks = list(zip(tasks, jitters, strict=True))
    capacity = _capacity_s(condition, present)
    scale = work_factor(condition, n, capacity)
    return {
        w: (task.task_id, round(task.work_s * scale * jitter, 1))
        for w, (task, jitter) in zip(ids, picks, strict=True)
    }


def _capacity_s(condition: Condition, present: Sequence[str]) -> float:
    """Resource time of a subrun: the latest deadline among the present workers."""
    by_id = {s.id: s.deadline_s for s in condition.worker_specs()}
    return max((by_id[w] for w in present if w in by_id), default=60.0 * condition.deadline.minutes)


def _balanced(catalog: Sequence[CatalogTask], seed: int, subrun: int, n: int) -> list[CatalogTask]:
    tiers = tiers_of(catalog, n)
    slots = balanced_slots(seed, subrun, n)
    pick = _stream(seed, n, 1_000 + subrun).random(n)
    out = []
    for p, slot in enumerate(slots):
        tier = tiers[_slot_tier(slot, n, len(tiers))]
        out.append(tier[int(pick[p] * len(tier))])
    return out

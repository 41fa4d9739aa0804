"""Outcome, workload and token measures validated both ways on scripted runs in memory.

Planted: a params knob puts an effect in (load 1.3 vs 0.7, shortest-job-first vs first come
first served, round robin vs first come first served, conversation off, budgets refilled
every subrun, one richer seat, three conversation turns instead of one, pay-your-bid vs
nothing charged) and the measure recovers it, paired on seeds, with the right sign and a
bootstrap CI over seeds that excludes 0.

Null: the same condition on disjoint seed sets (seed s against seed s + NULL_HALF) gives a CI
that includes 0 in at least 90 % of 200 random sets of 8 seed pairs; and knobs that must not
touch a measure (scratch memory, persona seating: demand and capacity) leave it unchanged.

Every batch is built once per module."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

from mbb import analysis as A
from mbb.analysis._frames import utterances
from mbb.analysis.mechanisms.screens import screens
from mbb.analysis.outcome import execution_by_worker, outcomes, waits
from mbb.analysis.tokens import cost_by_model, token_audit, token_efficiency
from mbb.analysis.workload import workload
from tests.analysis.test_planted_effects import REPS, batch

SEEDS = range(10)
SEEDS20 = range(20)  # the smaller effects (Gini, one seat's execution) get 20 seeds
PER_REP = 8
NULL_HALF = REPS * PER_REP  # seeds [0, 160) against [160, 320)


NULL_DRAWS = 200


def null_coverage(per_seed: pl.DataFrame, value: str, per_rep: int = PER_REP) -> int:
    """Of NULL_DRAWS random sets of `per_rep` seeds (drawn from all of `per_seed`), how many
    give a CI that includes 0.

    200 draws, not 20 disjoint sets: with 20 a measure whose interval covers 92 % fails the
    90 % mark one time in five (a share stuck at its ceiling in half the seeds, utilisation,
    scored 16/20 on one layout and 0.92 over 200 draws). A bound within 1e-12 (relative) of 0
    counts as 0: a share's per-seed difference is not exact in floating point
    (0.65 - 0.5 != -(0.35 - 0.5)), so a bound that is 0 in exact arithmetic lands at +-1e-17
    and would decide the test on rounding alone."""
    x_all = per_seed[value].to_numpy()
    assert x_all.size >= 2 * per_rep
    rng = np.random.default_rng(20261201)
    hits = 0
    for _ in range(NULL_DRAWS):
        x = x_all[rng.choice(x_all.size, per_rep, replace=False)]
        _, low, high = A.seed_bootstrap_ci(x)
        tol = 1e-12 * max(1.0, float(np.abs(x).max()))
        hits += low <= tol and high >= -tol
    return hits


def by_seed(tables: dict) -> pl.DataFrame:
    """`outcomes` with one row per seed (the runs table makes `seed` a grouping key)."""
    return outcomes(tables, "seed")


def paired(treated: pl.DataFrame, base: pl.DataFrame, value: str) -> dict[str, Any]:
    return A.paired_seed_difference(treated, base, value).row(0, named=True)


def halves(per_seed: pl.DataFrame, value: str) -> pl.DataFrame:
    """Seed s minus seed s + NULL_HALF of one condition: a difference whose truth is 0."""
    first = per_seed.filter(pl.col("seed") < NULL_HALF).select("seed", pl.col(value).alias("a"))
    second = per_seed.filter(pl.col("seed") >= NULL_HALF).select(
        (pl.col("seed") - NULL_HALF).alias("seed"), pl.col(value).alias("b")
    )
    d = first.join(second, on="seed").select(
        "seed", (pl.col("a").cast(pl.Float64) - pl.col("b").cast(pl.Float64)).alias("d")
    )
    assert d.height == NULL_HALF
    return d


def with_seed(frame: pl.DataFrame, tables: dict) -> pl.DataFrame:
    return frame.join(tables["runs"].select("run_id", "seed"), on="run_id")


# --- batches ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def load_pair():
    """The same seeds at load 1.3 (demand above capacity) and 0.7."""
    return (
        batch("base", {"name": "load_high", "tasks": {"load": 1.3}}),
        batch("base", {"name": "load_low", "tasks": {"load": 0.7}}),
    )


@pytest.fixture(scope="module")
def base_null():
    """Base on 2 x 160 seeds: the null batch of every measure."""
    return batch("base", None, range(2 * NULL_HALF))


@pytest.fixture(scope="module")
def base20():
    return batch("base", None, SEEDS20)


# --- outcomes: completion, progress, lateness, score ------------------------------------------
@pytest.mark.parametrize(
    ("value", "sign"),
    [
        ("completion", -1),
        ("progress", -1),
        ("score", -1),
        ("resolved", -1),
        ("deadline_miss", 1),
        ("max_lateness_s", 1),
    ],
)
def test_outcomes_planted_load(load_pair, value, sign):
    high, low = (by_seed(t) for t in load_pair)
    d = paired(high, low, value)
    assert d["n"] == len(SEEDS)
    assert sign * d["difference"] > 0 and (d["ci_low"] > 0 if sign > 0 else d["ci_high"] < 0), d


@pytest.mark.parametrize(
    "value",
    [
        "completion",
        "progress",
        "score",
        "resolved",
        "deadline_miss",
        "max_lateness_s",
        "mean_wait_s",
        "max_wait_s",
        "gini_exec",
        "credits_per_run",
        "mean_bid",
        "rounds_per_subrun",
        "private_msgs_per_run",
    ],
)
def test_outcomes_null_disjoint_seeds(base_null, value):
    assert null_coverage(halves(by_seed(base_null), value), "d") >= 0.9 * NULL_DRAWS


# --- waits: shortest job first against first come, first served -------------------------------
@pytest.fixture(scope="module")
def sjf_fcfs():
    return batch("mech_sjf"), batch("mech_fcfs")


def mean_wait_by_seed(tables: dict) -> pl.DataFrame:
    w = waits(tables).group_by("run_id").agg(pl.col("wait_s").mean(), pl.len().alias("requests"))
    return with_seed(w, tables)


def test_waits_planted_shortest_job_first(sjf_fcfs):
    """SJF minimises mean waiting time (a textbook result): the mean falls, and the longest
    wait rises (long jobs are passed over)."""
    sjf, fcfs = sjf_fcfs
    d = paired(mean_wait_by_seed(sjf), mean_wait_by_seed(fcfs), "wait_s")
    assert d["n"] == len(SEEDS) and d["difference"] < 0 and d["ci_high"] < 0, d
    o = paired(by_seed(sjf), by_seed(fcfs), "mean_wait_s")
    assert o["difference"] == pytest.approx(d["difference"])  # outcomes reads the same waits
    m = paired(by_seed(sjf), by_seed(fcfs), "max_wait_s")
    assert m["difference"] > 0 and m["ci_low"] > 0, m


def test_waits_null_disjoint_seeds(base_null):
    per = mean_wait_by_seed(base_null)
    assert per["requests"].min() > 0
    assert null_coverage(halves(per, "wait_s"), "d") >= 0.9 * NULL_DRAWS


# --- Gini of execution time: round robin against first come, first served ---------------------
@pytest.fixture(scope="module")
def rr_fcfs():
    return batch("mech_round_robin", None, SEEDS20), batch("mech_fcfs", None, SEEDS20)


def test_gini_planted_round_robin(rr_fcfs):
    """Round robin hands out equal quanta, so execution seconds are shared more evenly than
    when the first requester runs its full window."""
    rr, fcfs = rr_fcfs
    d = paired(by_seed(rr), by_seed(fcfs), "gini_exec")
    assert d["n"] == len(SEEDS20) and d["difference"] < 0 and d["ci_high"] < 0, d


def test_rounds_planted_round_robin(rr_fcfs):
    """Round robin queues an unfinished worker again behind the others: more rounds."""
    rr, fcfs = rr_fcfs
    d = paired(by_seed(rr), by_seed(fcfs), "rounds_per_subrun")
    assert d["n"] == len(SEEDS20) and d["difference"] > 0 and d["ci_low"] > 0, d


def test_private_messages_planted_conversation_off():
    """Without the conversation phase no message, private or not, can be sent: the count is
    n/a with its reason in every seed, not a measured 0 (M2), while base's is measured."""
    off = by_seed(batch("conversation_off"))
    assert off["private_msgs_per_run"].null_count() == off.height == len(SEEDS)
    assert off["private_msgs_per_run_why"].str.starts_with("no messages").all()
    assert by_seed(batch("base"))["private_msgs_per_run"].min() > 0


# --- execution by worker: a richer seat buys more execution -----------------------------------
def seat_exec(tables: dict, seat: str = "W1") -> pl.DataFrame:
    return with_seed(execution_by_worker(tables).filter(pl.col("worker") == seat), tables)


def test_execution_by_worker_planted_rich_seat(base20):
    rich = batch(
        "base", {"name": "w1_3000", "workers": {"overrides": {"W1": {"budget": 3000}}}}, SEEDS20
    )
    d = paired(seat_exec(rich), seat_exec(base20), "exec_s")
    assert d["n"] == len(SEEDS20) and d["difference"] > 0 and d["ci_low"] > 0, d


def test_execution_by_worker_null_disjoint_seeds(base_null):
    assert null_coverage(halves(seat_exec(base_null), "exec_s"), "d") >= 0.9 * NULL_DRAWS


# --- payments: budgets refilled every subrun --------------------------------------------------
@pytest.mark.parametrize("value", ["credits_per_run", "mean_bid"])
def test_payments_planted_refilled_budgets(value):
    refill = batch("base", {"name": "refill", "budget": {"reset_each_subrun": True}})
    d = paired(by_seed(refill), by_seed(batch("base")), value)
    assert d["n"] == len(SEEDS) and d["difference"] > 0 and d["ci_low"] > 0, d


# --- workload: demand, capacity, utilisation ---------------------------------------------------
@pytest.mark.parametrize(
    ("value", "sign"), [("load", 1), ("demand_s", 1), ("utilisation", 1), ("completion_rate", -1)]
)
def test_workload_planted_load(load_pair, value, sign):
    high, low = (workload(t, by="run_id") for t in load_pair)
    d = paired(high, low, value)
    assert d["n"] == len(SEEDS)
    assert sign * d["difference"] > 0 and (d["ci_low"] > 0 if sign > 0 else d["ci_high"] < 0), d


def test_workload_table_planted_load(load_pair):
    """The table's per-subrun intervals over seeds separate the two loads in every subrun."""
    high, low = (workload(t, by=("condition", "subrun")) for t in load_pair)
    assert high["n"].to_list() == low["n"].to_list() == [len(SEEDS)] * 4
    assert (high["load_low"] > low["load_high"]).all()
    assert (high["completion_rate_high"] < low["completion_rate_low"]).all()


@pytest.fixture(scope="module")
def unrelated():
    """Knobs that must not change the work brought or the time there is: scratch memory, and
    the personas' seats (tasks are balanced over seats and subruns whoever sits there)."""
    seeds = range(NULL_HALF)
    return (
        batch("base", None, seeds),
        [
            batch("memory_off", None, seeds),
            batch("base", {"name": "fixed_seats", "workers": {"seating": "fixed"}}, seeds),
        ],
    )


@pytest.mark.parametrize("value", ["demand_s", "capacity_s", "load"])
def test_workload_null_memory_and_seating(unrelated, value):
    base, others = unrelated
    b = workload(base, by="run_id")
    for other in others:
        o = workload(other, by="run_id")
        j = o.join(b, on="seed", suffix="_base")
        assert j.height == NULL_HALF
        assert np.allclose(j[value], j[f"{value}_base"], rtol=1e-12, atol=1e-9)
        # the runs themselves did change (this is not one batch twice)
        paid = by_seed(other).join(by_seed(base), on="seed", suffix="_base")
        assert (paid["credits_per_run"] != paid["credits_per_run_base"]).any()
        d = j.select("seed", (pl.col(value) - pl.col(f"{value}_base")).alias("d"))
        assert null_coverage(d, "d") == NULL_DRAWS


def test_workload_null_memory_utilisation(unrelated):
    """Scratch memory changes what is said, not how the resource is kept busy."""
    base, (memory_off, _) = unrelated
    j = workload(memory_off, by="run_id").join(
        workload(base, by="run_id"), on="seed", suffix="_base"
    )
    d = j.select("seed", (pl.col("utilisation") - pl.col("utilisation_base")).alias("d"))
    assert (d["d"] != 0).any()  # not the same runs twice
    assert null_coverage(d, "d") >= 0.9 * NULL_DRAWS


@pytest.mark.parametrize("value", ["load", "demand_s", "utilisation", "completion_rate"])
def test_workload_null_disjoint_seeds(base_null, value):
    assert null_coverage(halves(workload(base_null, by="run_id"), value), "d") >= 0.9 * NULL_DRAWS


# --- tokens: one conversation turn instead of three -------------------------------------------
@pytest.fixture(scope="module")
def turns_pair():
    """Base (3 conversation turns) and the same seeds with 1."""
    return batch("base"), batch("base", {"name": "one_turn", "negotiation": {"max_turns": 1}})


PRICE_IN, PRICE_OUT = 1e-6, 4e-6  # USD per token of the synthetic model


def with_llm_calls(tables: dict) -> dict:
    """`tables` plus synthetic `llm_call` events: one call per utterance (what an LLM
    negotiator makes), token counts drawn from one fixed distribution per run seed, so only
    the number of utterances the protocol asks for can move the totals."""
    u = with_seed(utterances(tables), tables).sort("run_id", "seq")
    rng = np.random.default_rng(list(u["seed"].unique().sort()))
    n = u.height
    prompt = rng.integers(800, 2000, n)
    completion = rng.integers(20, 300, n)
    calls = u.select(
        "run_id",
        "subrun",
        "round",
        "worker",
        pl.lit("negotiator").alias("role"),
        pl.col("source")
        .replace_strict(
            {"declaration": "declaration", "message": "conversation", "ballot": "ballot"}
        )
        .alias("phase"),
        pl.lit("synthetic-model").alias("model"),
    ).with_columns(
        pl.Series("prompt_tokens", prompt, pl.Int64),
        pl.Series("completion_tokens", completion, pl.Int64),
        pl.lit(0, pl.Int64).alias("reasoning_tokens"),
        pl.lit(0, pl.Int64).alias("cached_tokens"),
        pl.Series("cost_usd", prompt * PRICE_IN + completion * PRICE_OUT),
        pl.lit(False).alias("cache_hit"),
    )
    return {**tables, "llm_calls": calls}


def tokens_by_seed(tables: dict) -> pl.DataFrame:
    a = token_audit(tables)
    cost = cost_by_model(a, by=("condition", "run_id"))
    eff = token_efficiency(tables, a, by=("condition", "run_id"))
    return with_seed(
        cost.select("run_id", "calls", "total_tokens", "cost_per_run_usd").join(
            eff.select("run_id", "tokens_per_window_won", "tokens_per_credit_won"), on="run_id"
        ),
        tables,
    )


@pytest.mark.parametrize("value", ["calls", "total_tokens", "tokens_per_window_won"])
def test_tokens_planted_conversation_turns_scripted(turns_pair, value):
    three, one = (tokens_by_seed(t) for t in turns_pair)
    d = paired(three, one, value)
    assert d["n"] == len(SEEDS) and d["difference"] > 0 and d["ci_low"] > 0, d


@pytest.mark.parametrize("value", ["calls", "total_tokens", "cost_per_run_usd"])
def test_tokens_planted_conversation_turns_llm_calls(turns_pair, value):
    three, one = (with_llm_calls(t) for t in turns_pair)
    assert not token_audit(three)["approximate"].any()
    d = paired(tokens_by_seed(three), tokens_by_seed(one), value)
    assert d["n"] == len(SEEDS) and d["difference"] > 0 and d["ci_low"] > 0, d
    if value == "cost_per_run_usd":  # outcomes' cost column reads the same calls
        o = paired(by_seed(three), by_seed(one), "cost_per_run_usd")
        assert o["difference"] == pytest.approx(d["difference"])


@pytest.mark.parametrize(
    ("value", "llm"),
    [
        ("total_tokens", False),
        ("tokens_per_window_won", False),
        ("total_tokens", True),
        ("cost_per_run_usd", True),
    ],
)
def test_tokens_null_disjoint_seeds(base_null, value, llm):
    t = with_llm_calls(base_null) if llm else base_null
    assert null_coverage(halves(tokens_by_seed(t), value), "d") >= 0.9 * NULL_DRAWS


# --- screens: rotation of the award under pay-your-bid ----------------------------------------
def rotation_by_seed(tables: dict) -> pl.DataFrame:
    s = screens(tables).with_columns(
        (pl.col("rotation") - pl.col("rotation_chance")).alias("rotation_excess")
    )
    return with_seed(s, tables)


def test_rotation_planted_pay_your_bid():
    """Paying one's bid depletes the winner's budget, so the next award goes to someone who
    has waited (the screen's own caveat); with nothing charged that force is off. The chance
    level does not move, so the rise is turn-taking, not fewer eligible candidates."""
    paid = rotation_by_seed(batch("base", None, SEEDS20))
    free = rotation_by_seed(
        batch("base", {"name": "free", "mechanism": {"payment": "none"}}, SEEDS20)
    )
    d = paired(paid, free, "rotation")
    assert d["n"] == len(SEEDS20) and d["difference"] > 0 and d["ci_low"] > 0, d
    c = paired(paid, free, "rotation_chance")
    assert c["ci_low"] <= 0 <= c["ci_high"], c


@pytest.fixture(scope="module")
def rotation_null(base_null):
    return rotation_by_seed(base_null)


@pytest.mark.parametrize("value", ["rotation", "rotation_excess"])
def test_rotation_null_disjoint_seeds(rotation_null, value):
    assert (rotation_null["rotation_rounds"] > 0).mean() >= 0.9  # most runs have awards to score
    assert null_coverage(halves(rotation_null, value), "d") >= 0.9 * NULL_DRAWS

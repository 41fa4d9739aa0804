"""Every chart of means draws its interval or says why it has none, with the n behind it (a
reviewer's L8: tokens per credit, the strategic profile, institutional behaviours and the
execution per worker showed neither; the README promises every mean with its CI)."""

from __future__ import annotations

import polars as pl

from mbb import analysis as A
from mbb.viz import mechanisms as M
from mbb.viz import taxonomy as T
from mbb.viz import tokens as TK


def _subtitle(spec: dict) -> str:
    return " ".join(spec["title"]["subtitle"])


def test_tokens_per_credit_says_it_pools_runs_and_how_many(base_batch):
    tables = A.with_run_info(base_batch.tables, by_kind=base_batch.by_kind)
    eff = A.token_efficiency(tables, A.token_audit(tables))
    assert set(eff["runs"]) == {3}
    sub = _subtitle(TK.tokens_per_credit_chart(eff).to_dict())
    assert "no interval" in sub and "runs pooled: base 3" in sub


def test_taxonomy_profiles_say_why_no_interval_and_their_n(base_batch):
    t = base_batch.tables
    ev = A.classify_evidence(t)
    wr = A.worker_round_predictions(ev)
    profile = _subtitle(T.strategic_profile(t, wr).to_dict())
    assert "no interval" in profile and "n worker-rounds: " in profile
    inst = T.institutional_behaviours(A.institutions(t, wr), A.pair_institutions(t, ev))
    sub = _subtitle(inst.to_dict())
    assert "no interval" in sub and "over the 3 run(s)" in sub


def test_execution_per_worker_has_its_interval_in_the_tooltip_and_says_so():
    rows = [
        dict(run_id=f"b{i}~{m}", worker=w, exec_s=100.0 + 10 * i + k, windows=3,
             mechanism=m, base_run=f"b{i}", condition="base")
        for i in range(4)
        for m in ("negotiated", "fcfs")
        for k, w in enumerate(("W1", "W2"))
    ]  # fmt: skip
    spec = M.execution_by_worker(pl.DataFrame(rows)).to_dict()
    data = [r for v in spec["datasets"].values() for r in v]
    assert all(r["lo"] <= r["exec_s"] <= r["hi"] and r["runs"] == 4 for r in data)
    tips = {t.get("title") for t in spec["spec"]["encoding"]["tooltip"] if isinstance(t, dict)}
    assert {"95% low", "95% high"} <= tips
    sub = _subtitle(spec)
    assert "mean over 4 runs" in sub and "no whisker" in sub and "tooltip" in sub

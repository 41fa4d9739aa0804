"""A cost nobody was billed reads n/a with its reason, never "$0": scripted runs call no model
(run_condition's outcomes and the compare runs table read "$0" per run), and a stub study's
models are answered on loopback (the study index read "$0.0000"). A reviewer's find (M2)."""

from __future__ import annotations

import polars as pl

import mbb
from mbb.analysis.compare import run_table
from mbb.analysis.outcome import outcomes
from mbb.batch.build import run_condition
from mbb.batch.runs import spend_table_html
from mbb.core.tables import tables_from_lines


def _scripted() -> dict:
    cond = mbb.load_params("base", {"subruns": 1})
    log = run_condition(cond, 0).log
    return mbb.analysis.with_run_info(tables_from_lines(log.by_kind), by_kind=log.by_kind)


def test_a_scripted_run_has_no_cost_and_says_why():
    t = _scripted()
    out = outcomes(t, "subrun")
    assert out["cost_per_run_usd"].null_count() == out.height  # not 0.0
    assert (out["cost_per_run_usd_why"] == "scripted: no API calls").all()
    for frame in (out, run_table(t)):
        text = str(mbb.table(frame))
        assert "n/a (scripted: no API calls)" in text and "$0" not in text
        assert "cost_per_run_usd_why" not in text and "why" not in text.split("\n")[0]


def test_a_stub_models_cost_is_na_not_0():
    calls = pl.DataFrame(
        {
            "model": ["stub-smollm2", "qwen-local"],
            "condition": ["base", "base"],
            "run_id": ["base-seed0000", "base-seed0000"],
            "prompt_tokens": [100, 100],
            "cached_tokens": [0, 0],
            "completion_tokens": [10, 10],
            "cost_usd": [0.0, 0.0],
        }
    )
    html = spend_table_html(calls)
    rows = {r.split("</td>", 1)[0]: r for r in html.split("<tr><td class=l>")[1:]}
    stub, local = rows["stub-smollm2"], rows["qwen-local"]
    assert "n/a (stub: no API calls)" in stub and "$0" not in stub
    assert "$0.0000" in local  # a model priced at 0 that was called: its cost is $0


def test_private_messages_without_conversation_are_na_not_0():
    """conversation_off and mech_fcfs send no message at all: their private messages per run
    read 0, as if measured (M2); n/a with the reason. A talking run keeps its count."""

    def run(name: str) -> dict:
        log = run_condition(mbb.load_params(name, {"subruns": 1}), 0).log
        return mbb.analysis.with_run_info(tables_from_lines(log.by_kind), by_kind=log.by_kind)

    quiet = outcomes(run("conversation_off"), "condition")
    assert quiet["private_msgs_per_run"].null_count() == quiet.height
    assert quiet["private_msgs_per_run_why"].str.starts_with("no messages").all()
    assert "n/a (no messages" in str(mbb.table(quiet))
    talk = outcomes(_scripted(), "condition")
    assert talk["private_msgs_per_run"].is_not_null().all()
    assert talk["private_msgs_per_run_why"].is_null().all()

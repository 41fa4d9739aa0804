"""Spend caps: a run stops cleanly at `llm.max_tokens_total` / `llm.max_cost_usd` as a recorded,
resumable stop (whole event lines, nothing after the stop record), and resuming it until it
completes gives the same events as a run without a cap."""

from __future__ import annotations

import json
import os

import polars as pl
import pytest

from mbb.batch.build import load_params
from mbb.batch.resume import resume_run
from mbb.batch.runner import run_many
from mbb.core.eventlog import read_lines
from mbb.llm.budget import LEDGER_ENV, BudgetExhausted, SpendLedger, ledger_for
from mbb.llm.provider import Call
from mbb.params import ParamsError
from mbb.testing.emulate import ProviderEmulator
from mbb.testing.testserver import FakeOpenAIServer, declaring_responder

from .conftest import KEY_ENV, SECRET, replay_comparable


def condition(root, url, tmp_path, **llm):
    model = {
        "model": "m-a",
        "base_url": url,
        "api_key_env": KEY_ENV,
        "timeout_s": 5.0,
        "structured": "json_object_schema",
        "concurrency": 5,
    }
    over = {
        "name": "capped",
        "subruns": 2,
        "workers": {"negotiator": "llm", "model": "a"},
        "models": {"a": model},
        "prices": {"m-a": {"prompt": 1.0, "completion": 2.0, "cached_prompt": 0.1}},
        "llm": {"cache": "read_write", "cache_file": str(tmp_path / "cache.sqlite"), **llm},
    }
    return load_params(root / "params" / "llm_negotiators.yaml", over)


def test_caps_are_left_out_of_the_params_when_unset(root):
    cond = load_params(root / "params" / "base.yaml")
    assert "max_cost_usd" not in cond.model_dump(mode="json")["llm"]
    cond = load_params(root / "params" / "base.yaml", {"llm": {"max_cost_usd": 2.5}})
    assert cond.model_dump(mode="json")["llm"]["max_cost_usd"] == 2.5


@pytest.mark.parametrize("cap", [{"max_tokens_total": 60_000}, {"max_cost_usd": 0.04}])
def test_a_cap_stops_the_run_cleanly_and_resuming_finishes_it(root, tmp_path, monkeypatch, cap):
    monkeypatch.setenv(KEY_ENV, SECRET)
    emulator = ProviderEmulator("openai", declaring_responder, reasoning=None)
    with FakeOpenAIServer(emulator, api_key=SECRET, models=("m-a",)) as srv:
        free = run_many(
            condition(root, srv.url, tmp_path / "free"), seed=3, out_dir=tmp_path / "free"
        ).check()
        full = read_lines(free.run_dirs[0] / "events.jsonl")
        calls_free = len(srv.completions)

        cond = condition(root, srv.url, tmp_path / "capped", **cap)
        out = tmp_path / "capped"
        batch = run_many(cond, seed=3, out_dir=out).check()  # a stop is not a failure
        assert list(batch.stopped) == batch.run_ids == ["capped-a-seed0003"]
        path = out / "capped-a-seed0003" / "events.jsonl"
        lines = read_lines(path)
        assert path.read_text().endswith("\n")  # whole lines only
        last = json.loads(lines[-1])
        assert last["kind"] == "run_ended" and last["status"] == "stopped"
        assert "cap reached" in last["error"]
        spent = [json.loads(x) for x in lines if '"llm_call"' in x]
        tokens = sum(c["prompt_tokens"] + c["completion_tokens"] for c in spent)
        if "max_tokens_total" in cap:  # stopped at the cap, overshooting by one phase at most
            assert cap["max_tokens_total"] <= tokens < cap["max_tokens_total"] * 1.5
        meta = json.loads((out / "capped-a-seed0003" / "meta.json").read_text())
        assert meta["status"] == "stopped"

        for _ in range(30):  # each resume gets the cap again for new calls
            resume_run(path.parent, cond)
            last = json.loads(read_lines(path)[-1])
            if last["status"] == "completed":
                break
            assert last["status"] == "stopped"
        assert last["status"] == "completed"
    resumed = [x.replace("capped-a-seed0003", "R") for x in read_lines(path)]
    base = [x.replace("capped-a-seed0003", "R") for x in full]

    def strip(lines):  # the server's prefix cache saw other requests before: cached tokens differ
        out = []
        for x in replay_comparable(lines)[1:]:
            d = json.loads(x)
            d.pop("cached_tokens", None), d.pop("cost_usd", None)
            out.append(d)
        return out

    assert [json.loads(x)["kind"] for x in resumed] == [json.loads(x)["kind"] for x in base]
    assert strip(resumed) == strip(base)
    assert len(srv.completions) >= calls_free  # nothing was asked twice beyond the stop


def test_a_shared_ledger_caps_several_batches(tmp_path, monkeypatch):
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "spend.sqlite"))
    monkeypatch.setenv("MBB_MAX_COST_USD", "1.0")
    a, b = ledger_for(None, None), ledger_for(None, None)
    assert a is not None and b is not None
    a.add(100, 0.6)
    b.check()
    b.add(100, 0.5)
    with pytest.raises(BudgetExhausted, match="spend cap reached"):
        a.check()
    assert SpendLedger(path=tmp_path / "spend.sqlite").spent() == (pytest.approx(1.1), 200)


@pytest.mark.notebook
def test_a_sweep_stops_at_its_cap_and_goes_on_when_run_again(root, tmp_path, monkeypatch):
    from mbb.cli import main

    for var in (LEDGER_ENV, "MBB_MAX_COST_USD", "MBB_MAX_TOKENS_TOTAL"):
        monkeypatch.delenv(var, raising=False)
    emulator = ProviderEmulator("openai", declaring_responder, reasoning=None)  # counts tokens
    with FakeOpenAIServer(emulator, models=("m-a",)) as srv:
        files = []
        for name in ("cap_a", "cap_b"):
            p = tmp_path / f"{name}.yaml"
            model = f"{{model: m-a, base_url: {srv.url}, api_key_env: null, timeout_s: 5}}"
            p.write_text(
                f"extends: {root / 'params' / 'llm_negotiators.yaml'}\nname: {name}\n"
                f"subruns: 1\nworkers: {{count: 2, model: a}}\nmodels: {{a: {model}}}\n"
                f"llm: {{cache_file: {tmp_path / 'cache.sqlite'}}}\n"
            )
            files.append(str(p))
        out = tmp_path / "sweep"
        probe = str(root / "tests" / "fixtures" / "sweep_probe.ipynb")
        argv = ["sweep", *files, "--seeds", "0..1", "--out", str(out), "--quiet"]
        argv += ["--notebook", probe, "--workers", "1"]
        assert main([*argv, "--max-tokens-total", "3000"]) == 0
        # the cap reached the kernels through the environment, and left with the sweep: a later
        # run in this process is not capped by it
        assert all(v not in os.environ for v in (LEDGER_ENV, "MBB_MAX_TOKENS_TOTAL"))
        results = json.loads((out / "sweep.json").read_text())["results"]
        assert {r["status"] for r in results} == {"stopped"}
        assert not list(out.glob("*/.done"))
        n = len(srv.completions)
        assert main([*argv, "--max-tokens-total", "100000000"]) == 0
        results = json.loads((out / "sweep.json").read_text())["results"]
        assert {r["status"] for r in results} == {"ok"}
        assert len(srv.completions) > n
        for cond in ("cap_a", "cap_b"):
            for seed in (0, 1):
                path = out / cond / f"{cond}-a-seed000{seed}" / "events.jsonl"
                assert json.loads(read_lines(path)[-1])["status"] == "completed"


# --- a model without a price: its cost is unknown, never $0, and no cap in USD can count it ---
def _unpriced(root, url, **over):
    model = {"model": "m-free", "base_url": url, "api_key_env": None, "timeout_s": 5.0}
    base = {
        "name": "unpriced",
        "subruns": 1,
        "workers": {"count": 2, "negotiator": "llm", "model": "a"},
        "models": {"a": {**model, "structured": "json_object_schema"}},
        "prices": {"m-a": {"prompt": 1.0, "completion": 2.0}},  # another model's price only
        "llm": {"cache": "off"},
    }
    base.update(over)
    return base


def test_a_cost_cap_over_an_unpriced_model_is_refused_when_the_params_load(root):
    path = root / "params" / "llm_negotiators.yaml"
    with pytest.raises(ParamsError) as err:
        load_params(path, _unpriced(root, "http://127.0.0.1:9/v1", llm={"max_cost_usd": 5.0}))
    msg = str(err.value)
    assert "\n" not in msg
    assert "llm.max_cost_usd (5) cannot be kept: model 'm-free' has no price" in msg
    # a token cap counts tokens, which are known: it stays allowed; so does a priced model
    load_params(path, _unpriced(root, "http://127.0.0.1:9/v1", llm={"max_tokens_total": 10}))
    priced = {"m-free": {"prompt": 0.0, "completion": 0.0, "date": "2026-12-01", "source": "local"}}
    over = _unpriced(root, "http://127.0.0.1:9/v1", llm={"max_cost_usd": 5.0}, prices=priced)
    cond = load_params(path, over)
    assert cond.prices["m-free"].source == "local"
    # a scripted condition with a cap has no LLM worker to price
    load_params(root / "params" / "base.yaml", {"llm": {"max_cost_usd": 1.0}})


def test_a_sweeps_cost_cap_over_an_unpriced_model_is_refused_before_any_job(
    root, tmp_path, capsys, monkeypatch
):
    from mbb.cli import main

    for var in (LEDGER_ENV, "MBB_MAX_COST_USD", "MBB_MAX_TOKENS_TOTAL"):
        monkeypatch.delenv(var, raising=False)
    p = tmp_path / "unpriced.yaml"
    p.write_text(
        f"extends: {root / 'params' / 'llm_negotiators.yaml'}\nname: unpriced\n"
        "workers: {count: 2, model: a}\n"
        "models: {a: {model: m-free, base_url: 'http://127.0.0.1:9/v1', api_key_env: null}}\n"
    )
    out = tmp_path / "sweep"
    rc = main(["sweep", str(p), "--seeds", "0..0", "--out", str(out), "--quiet",
               "--max-cost-usd", "2"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "--max-cost-usd 2 (unpriced) cannot be kept: model 'm-free' has no price" in err[0]
    assert not (out / "unpriced").exists() and LEDGER_ENV not in os.environ


def test_a_shared_cost_cap_refuses_an_unpriced_call_before_sending_it(tmp_path, monkeypatch):
    """The backstop: a cap set where no params are checked (a sweep kernel's shared ledger)
    refuses to send a call it could not count."""
    import asyncio

    from mbb.core.errors import LlmConfigError
    from mbb.llm.client import ChatRequest, LlmClient
    from mbb.llm.config import ModelConfig

    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "spend.sqlite"))
    monkeypatch.setenv("MBB_MAX_COST_USD", "1.0")
    with FakeOpenAIServer(models=("m-free",)) as srv:
        client = LlmClient(budget=ledger_for(None, None))
        cfg = ModelConfig(model="m-free", base_url=srv.url, api_key_env=None)
        req = ChatRequest(messages=[{"role": "user", "content": "x"}])
        with pytest.raises(LlmConfigError, match="model 'm-free' has no price"):
            asyncio.run(client.network.complete(Call.of(cfg, req)))
        assert srv.completions == []


@pytest.mark.parametrize("cap", ["MBB_MAX_TOKENS_TOTAL", "MBB_MAX_COST_USD"])
def test_a_cap_over_an_endpoint_that_reports_no_usage_stops_the_call(tmp_path, monkeypatch, cap):
    """A cap counts what the endpoint reports: an answer with no token counts cannot be
    counted, so the call is refused with a line naming the model, never counted as 0."""
    import asyncio

    from mbb.core.errors import LlmConfigError
    from mbb.llm.client import ChatRequest, LlmClient
    from mbb.llm.config import ModelConfig
    from mbb.testing.testserver import Reply

    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "spend.sqlite"))
    monkeypatch.setenv(cap, "1000000")
    with FakeOpenAIServer(models=("m-a",)) as srv:
        bare = Reply.completion("no counts")
        del bare.body["usage"]
        srv.push(bare)
        client = LlmClient(
            budget=ledger_for(None, None), prices={"m-a": {"prompt": 1.0, "completion": 2.0}}
        )
        cfg = ModelConfig(model="m-a", base_url=srv.url, api_key_env=None)
        req = ChatRequest(messages=[{"role": "user", "content": "x"}])
        with pytest.raises(LlmConfigError, match="model 'm-a' reports no token usage"):
            asyncio.run(client.network.complete(Call.of(cfg, req)))


def test_answers_without_usage_are_flagged_in_events_tables_and_the_report(root):
    """A run against an endpoint that never reports usage: its calls' tokens and cost are
    null, the token audit and the spend table count the calls without usage, and the cost
    reads unknown, never $0."""
    from mbb.analysis import cost_by_model, token_audit
    from mbb.analysis.tokens import spend_by_model
    from mbb.batch.runs import spend_table_html
    from mbb.batch.viewer import _measures

    emulator = ProviderEmulator("openai", declaring_responder, reasoning=None)

    def no_usage(body):
        reply = emulator(body)
        reply.body.pop("usage", None)
        return reply

    prices = {"m-free": {"prompt": 1.0, "completion": 2.0}}
    with FakeOpenAIServer(no_usage, models=("m-free",)) as srv:
        cond = load_params(
            root / "params" / "llm_negotiators.yaml", _unpriced(root, srv.url, prices=prices)
        )
        batch = run_many(cond, runs=1).check()
    calls = batch.tables["llm_calls"]
    assert calls.height > 0
    assert calls["prompt_tokens"].is_null().all() and calls["cost_usd"].is_null().all()
    audit = token_audit(batch.tables)
    by_model = cost_by_model(audit)
    assert by_model["cost_usd"].to_list() == [None]
    assert by_model["calls_without_usage"].to_list() == [calls.height]
    assert by_model["cost_unknown_because"].to_list() == [f"{calls.height} calls without usage"]
    assert spend_by_model(batch.tables)["calls_without_usage"].to_list() == [calls.height]
    html = spend_table_html(calls.with_columns(condition=pl.lit("unpriced")))
    unknown = f"unknown ({calls.height} calls without usage)"
    assert unknown in html and "$0" not in html
    assert "0.0%" not in html and "<td>unknown</td>" in html  # the cached share too
    (row,) = _measures(batch.tables).values()  # the viewer's runs table: the same wording
    assert row["tokens"] == row["cost_usd"] == unknown


def test_an_unpriced_models_spend_is_unknown_in_events_and_tables(root):
    from mbb.analysis import cost_by_model, token_audit
    from mbb.analysis.outcome import outcomes

    emulator = ProviderEmulator("openai", declaring_responder, reasoning=None)
    with FakeOpenAIServer(emulator, models=("m-free",)) as srv:
        cond = load_params(root / "params" / "llm_negotiators.yaml", _unpriced(root, srv.url))
        batch = run_many(cond, runs=1).check()
    calls = batch.tables["llm_calls"]
    assert calls.height > 0 and calls["cost_usd"].is_null().all()
    assert calls["prompt_tokens"].sum() > 0  # the tokens are known, the cost is not
    by_model = cost_by_model(token_audit(batch.tables))
    assert by_model["cost_usd"].to_list() == [None]
    assert by_model["cost_unknown_because"].to_list() == ["no price for this model"]
    per_run = outcomes(batch.tables, ["run_id"])
    assert per_run["cost_per_run_usd"].to_list() == [None]


def test_a_cost_partly_unknown_says_what_is_known():
    """Two calls failed (no usage) among many answered and priced: the spend said 'unknown'
    for the whole model and hid the cost of the answered ones (a newcomer's outage); it says
    the known part as a lower bound, and 'unknown' alone when nothing is known."""
    from mbb.analysis.tokens import cost_text, tokens_text
    from mbb.batch.runs import spend_table_html

    calls = pl.DataFrame(
        {
            "run_id": ["r"] * 3,
            "condition": ["c"] * 3,
            "model": ["m"] * 3,
            "prompt_tokens": [100, 100, None],
            "cached_tokens": [0, 0, None],
            "completion_tokens": [10, 10, None],
            "cost_usd": [0.0015, 0.0015, None],
        }
    )
    html = spend_table_html(calls)
    assert "≥ $0.0030 + unknown (1 calls without usage)" in html and "$0.0000" not in html
    assert cost_text(None, 2, 0.0) == cost_text(None, 2) == "unknown (2 calls without usage)"
    # the token sums too: they passed for the whole model's (200 prompt tokens, no '≥')
    assert "<td>≥ 200 + unknown (1 calls without usage)</td>" in html
    assert "<td>≥ 20 + unknown (1 calls without usage)</td>" in html
    assert tokens_text(1234) == "1,234" and tokens_text(None) == "unknown"
    assert tokens_text(0, 3) == tokens_text(None, 3) == "unknown (3 calls without usage)"

"""`mbb estimate`: every preset's dry run is emulated as that preset's endpoint, so a file mixing
presets is estimated (non-zero, priced, reasoning counted); a dry-run call that fails is an error
naming the model and the endpoint's error, never a zero; a model without a price is unpriced;
the estimate comes within 25 % of what runs then use; and the reasoning-effort condition files."""

from __future__ import annotations

import pytest

from mbb.batch.build import load_params
from mbb.batch.estimate import (
    EstimateError,
    Limits,
    emulated_calls,
    estimate,
    format_rows,
    reasoning_from,
    totals,
)
from mbb.batch.runner import run_many
from mbb.cli import main
from mbb.llm import presets
from mbb.llm.client import ChatRequest, request_body
from mbb.params import ParamsError
from mbb.testing.emulate import ProviderEmulator
from mbb.testing.testserver import FakeOpenAIServer, declaring_responder

SMALL = {"subruns": 1, "workers": {"count": 3}, "negotiation": {"max_turns": 1}}


def _cond(root, name="llm_negotiators", **over):
    base = {
        "subruns": 2,
        "workers": {"count": 3, "model": "hosted"},
        "models": {"hosted": {"preset": "openai", "api_key_env": None}},
        "prices": {"gpt-4o-mini": {"prompt": 0.15, "completion": 0.6, "cached_prompt": 0.075}},
    }
    base.update(over)
    return load_params(root / "params" / f"{name}.yaml", base)


def test_a_mixed_preset_file_is_estimated_non_zero_priced_and_with_reasoning(root):
    """reasoning_effort.yaml names OpenAI, Gemini and OpenRouter presets; one condition gives
    its workers two of them (a mixed roster), another row per model of the file."""
    mixed = load_params(
        root / "params" / "reasoning_effort.yaml",
        {**SMALL, "workers": {"count": 3, "overrides": {"W2": {"model": "gemini_flash"}}}},
    )
    rows = estimate(mixed, runs=5, dry_runs=1)
    assert sorted(r.model for r in rows) == ["gemini_flash", "o4_mini"]
    for r in rows:
        assert r.runs == 5 and r.calls > 0 and r.prompt_tokens > 0 and r.cached_tokens > 0
        assert r.effort == "medium" and r.reasoning_basis == "medium: 1,200/call (mbb assumption)"
        assert r.reasoning_tokens == pytest.approx(r.calls * presets.REASONING_TOKENS["medium"])
        assert r.completion_tokens > r.reasoning_tokens
        assert r.cost_usd is not None and r.cost_usd > 0 and r.price is not None
        assert r.wall_s > 0 and r.critical_path_s > 0
    by_model = {r.model: r for r in rows}
    assert by_model["o4_mini"].calls == pytest.approx(2 * by_model["gemini_flash"].calls, rel=0.3)
    one = load_params(root / "params" / "reasoning_high.yaml", SMALL)
    rows = estimate(one, models=["o4_mini", "openrouter_o4_mini"], runs=2, dry_runs=1)
    assert [(r.model, r.preset, r.effort) for r in rows] == [
        ("o4_mini", "openai_reasoning", "high"),
        ("openrouter_o4_mini", "openrouter", "high"),
    ]
    assert all(r.reasoning_tokens == pytest.approx(r.calls * 3000) for r in rows)
    assert all(r.cost_usd and r.cost_usd > 0 for r in rows)


def test_a_failing_dry_run_is_an_error_naming_the_model_and_the_endpoints_error(root, capsys):
    """A config sending what its provider refuses (Gemini rejects unknown fields): the dry run's
    calls get HTTP 400 and the estimate stops with that error, never a $0 estimate."""
    over = {
        **SMALL,
        "workers": {"count": 2, "model": "gemini_flash"},
        "models": {"gemini_flash": {"extra_body": {"prompt_cache_key": "k"}}},
    }
    cond = load_params(root / "params" / "reasoning_effort.yaml", over)
    with pytest.raises(EstimateError) as err:
        estimate(cond, runs=3, dry_runs=1)
    msg = str(err.value)
    assert "model 'gemini_flash' (gemini-2.5-flash, preset gemini)" in msg
    assert "HTTP 400" in msg and 'Unknown name "prompt_cache_key"' in msg
    rc = main(["estimate", "reasoning_effort", "--model", "gemini_flash", "--dry-runs", "1",
               "--set", "subruns=1", "--set", "workers.count=2",
               "--set", "models.gemini_flash.extra_body.prompt_cache_key=k"])  # fmt: skip
    captured = capsys.readouterr()
    assert rc == 2 and captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1 and "HTTP 400" in captured.err


def test_an_unpriced_model_is_shown_unpriced_never_zero(root):
    hosted = {"hosted": {"model": "gpt-new", "preset": "openai", "api_key_env": None}}
    cond = _cond(root, **{**SMALL, "workers": {"count": 2, "model": "hosted"}}, models=hosted)
    (row,) = estimate(cond, runs=4, dry_runs=1)
    assert row.cost_usd is None and row.price is None and row.calls > 0
    lines = format_rows([row])
    assert lines[1].split()[-1] == "unpriced"
    assert "price gpt-new: none given: unpriced, cost unknown" in lines
    assert not any("$0.0000" in x for x in lines)
    (total,) = totals([row, row])
    assert total.cost_usd is None


def test_the_estimate_is_within_25_percent_of_what_runs_then_use(root):
    """Other seeds, and a model whose reasoning length varies call by call (±50 % around the
    assumption), against the same emulated endpoints."""
    for cond in (
        _cond(root),
        load_params(
            root / "params" / "reasoning_low.yaml", {"subruns": 2, "workers": {"count": 3}}
        ),
    ):
        (row,) = estimate(cond, runs=3, dry_runs=2)
        used, _ = emulated_calls(cond, range(50, 53), spread=0.5)
        price = cond.prices[row.endpoint_model]
        cost = sum(
            price.cost(r["prompt_tokens"], r["completion_tokens"], r["cached_tokens"])
            for r in used.iter_rows(named=True)
        )
        assert row.calls == pytest.approx(used.height, rel=0.25)
        assert row.tokens == pytest.approx(
            float(used["prompt_tokens"].sum() + used["completion_tokens"].sum()), rel=0.25
        )
        assert row.reasoning_tokens == pytest.approx(
            float(used["reasoning_tokens"].sum()), rel=0.25
        )
        assert row.cost_usd == pytest.approx(cost, rel=0.25)
        if row.effort is None:
            assert row.reasoning_tokens == 0 == used["reasoning_tokens"].sum()


def test_wall_time_is_the_largest_of_its_stated_bounds(root):
    cond = _cond(root, **{**SMALL, "workers": {"count": 3, "model": "hosted"}})
    (free,) = estimate(cond, runs=40, dry_runs=1)
    per_run = free.calls / free.runs
    assert 1 <= free.critical_path_s / free.latency_s <= per_run  # calls overlap, some
    assert free.wall_s == pytest.approx(
        max(free.critical_path_s, free.calls * free.latency_s / free.concurrency)
    )
    (slow,) = estimate(cond, runs=40, dry_runs=1, limits={"hosted": Limits(8, rpm=60)})
    assert slow.wall_bound == "60 requests/min" and slow.wall_s == pytest.approx(slow.calls)
    (one,) = estimate(cond, runs=1, dry_runs=1)
    assert one.wall_bound == "one run's sequential calls"


def test_recorded_runs_reasoning_calibration_and_the_command(root, tmp_path, capsys):
    cond = load_params(root / "params" / "reasoning_medium.yaml", {**SMALL, "seed": 7})
    emulator = ProviderEmulator(
        "openai_reasoning", declaring_responder, reasoning_tokens={"medium": 500}
    )
    with FakeOpenAIServer(emulator, models=("o4-mini",)) as srv:
        over = {**SMALL, "llm": {"cache": "off"}, "models": {"o4_mini": {
            "base_url": srv.url, "api_key_env": None}}}  # fmt: skip
        live = load_params(root / "params" / "reasoning_medium.yaml", over)
        batch = run_many(live, runs=2, out_dir=tmp_path / "rec").check()
    (rec,) = estimate(cond, runs=10, recorded=[tmp_path / "rec"])
    calls = batch.tables["llm_calls"]
    assert rec.source == "recorded" and rec.sample_runs == 2 and rec.reasoning_basis == "recorded"
    assert rec.prompt_tokens == pytest.approx(calls["prompt_tokens"].sum() * 5)
    assert rec.reasoning_tokens == pytest.approx(calls.height * 500 * 5)
    assert rec.critical_path_s > 0 and rec.latency_s > 0  # from the recorded latencies
    assert reasoning_from([tmp_path / "rec"]) == {"o4-mini": 500}
    # a run cut short, or a run folder that is a link, is left out and said: a cut run scaled
    # to a study under-counted its calls without a word, a linked one was read from elsewhere
    import shutil

    cut = tmp_path / "cut"
    shutil.copytree(tmp_path / "rec", cut)
    log = sorted(cut.glob("*/events.jsonl"))[1]
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:40]))
    (cut / "x-seed0009").symlink_to(sorted((tmp_path / "rec").glob("*/events.jsonl"))[0].parent)
    capsys.readouterr()
    (part,) = estimate(cond, runs=10, recorded=[cut])
    err = capsys.readouterr().err
    assert part.sample_runs == 1 and part.prompt_tokens == pytest.approx(rec.prompt_tokens, 0.2)
    assert "warning: left out 1 recorded run(s): not finished" in err
    assert "warning: left out 1 recorded run(s): a symbolic link to a folder elsewhere" in err
    (cal,) = estimate(
        cond, runs=10, dry_runs=1, reasoning_tokens=reasoning_from([tmp_path / "rec"])
    )
    assert cal.reasoning_tokens == pytest.approx(cal.calls * 500)
    assert cal.reasoning_basis == "medium: 500/call (given)"

    rc = main(["estimate", "llm_negotiators", "--model", "local,hosted", "--runs", "3",
               "--dry-runs", "1", "--set", "subruns=1", "--set", "workers.count=2"])  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert rc == 0 and [x.split()[1] for x in out[1:3]] == ["local", "hosted"]
    assert all(x.split()[3] == "3" for x in out[1:3])
    assert any(x.startswith("wall time of the study:") for x in out)
    rc = main(["estimate", "reasoning_medium", "--runs", "2", "--dry-runs", "1", "--set",
               "subruns=1", "--reasoning-tokens", "medium=700"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0 and "reasoning o4-mini: medium: 700/call (given)" in out
    assert main(["estimate", "llm_negotiators", "--model", "gpt9", "--runs", "3"]) == 2
    assert "configured models: hosted, local" in capsys.readouterr().err
    assert main(["estimate", "llm_negotiators", "--reasoning-tokens", "medium"]) == 2
    assert "is not NAME=TOKENS" in capsys.readouterr().err


def test_a_scripted_condition_uses_nothing(root):
    (row,) = estimate(load_params(root / "params" / "base.yaml"), runs=3)
    assert row.model == "scripted" and row.calls == 0 and row.cost_usd == 0.0


@pytest.mark.parametrize("effort", ["low", "medium", "high"])
def test_reasoning_effort_condition_files(root, effort):
    cond = load_params(root / "params" / f"reasoning_{effort}.yaml")
    req = ChatRequest(messages=[{"role": "user", "content": "x"}])
    o = request_body(cond.models["o4_mini"], req)
    assert o["reasoning_effort"] == effort and "max_completion_tokens" in o
    assert "temperature" not in o
    r = request_body(cond.models["openrouter_o4_mini"], req)
    assert r["reasoning"] == {"effort": effort}
    assert all(p.date and p.source for p in cond.prices.values())  # where and when read
    with pytest.raises(ParamsError, match="does not accept temperature"):
        load_params(
            root / "params" / f"reasoning_{effort}.yaml",
            {"models": {"o4_mini": {"temperature": 0.7}}},
        )
    with pytest.raises(ParamsError, match=r"must be one of low\|medium\|high for o1/o3/o4"):
        load_params(
            root / "params" / f"reasoning_{effort}.yaml",
            {"models": {"o4_mini": {"reasoning_effort": "minimal"}}},
        )

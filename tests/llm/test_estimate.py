"""`mbb estimate` and the reasoning-effort condition (Table 9)."""

from __future__ import annotations

import pytest

from mbb.batch.build import load_params, run_condition
from mbb.batch.estimate import _loopback, estimate_from_runs, estimate_study
from mbb.batch.runner import run_many
from mbb.cli import main
from mbb.core.tables import tables_from_log
from mbb.llm.client import ChatRequest, request_body
from mbb.params import ParamsError
from mbb.testing.emulate import ProviderEmulator
from mbb.testing.testserver import FakeOpenAIServer, declaring_responder


def _cond(root, **over):
    base = {
        "subruns": 2,
        "workers": {"count": 3, "model": "hosted"},
        "models": {"hosted": {"preset": "openai", "api_key_env": None}},
        "prices": {"gpt-4o-mini": {"prompt": 0.15, "completion": 0.6, "cached_prompt": 0.075}},
    }
    base.update(over)
    return load_params(root / "params" / "llm_negotiators.yaml", base)


def test_the_estimate_is_within_25_percent_of_what_runs_then_use(root):
    cond = _cond(root)
    est = estimate_study(cond, 4, dry_runs=2)
    assert est.model == "hosted" and est.runs == 4 and est.cost_usd > 0
    used = []
    emulator = ProviderEmulator("openai", declaring_responder, reasoning=None)
    with FakeOpenAIServer(emulator, models=("gpt-4o-mini",)) as srv:
        live = _loopback(cond, srv.url)
        for s in range(50, 54):
            used.append(tables_from_log(run_condition(live, s, None).log)["llm_calls"])
    tokens = sum(int(c["prompt_tokens"].sum() + c["completion_tokens"].sum()) for c in used)
    assert est.tokens == pytest.approx(tokens, rel=0.25)


def test_estimate_from_recorded_runs_and_the_command(root, tmp_path, capsys):
    cond = _cond(root, subruns=1)
    with FakeOpenAIServer(declaring_responder, models=("gpt-4o-mini",)) as srv:
        live = _loopback(cond, srv.url)
        batch = run_many(live, runs=2, out_dir=tmp_path / "rec").check()
    est = estimate_from_runs(cond, 10, [tmp_path / "rec"])
    assert est.sample_runs == 2 and est.source == "recorded"
    recorded = sum(
        int(c["prompt_tokens"].sum()) for c in [batch.tables["llm_calls"]]
    )  # the sample's prompt tokens, scaled x5
    assert est.prompt_tokens == pytest.approx(recorded * 5)
    rc = main(["estimate", "llm_negotiators", "--model", "local,hosted", "--runs", "3",
               "--dry-runs", "1", "--set", "subruns=1", "--set", "workers.count=2"])  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert rc == 0 and [x.split()[1] for x in out] == ["local", "hosted"]
    assert all("3 runs" in x and "dry run of 1" in x for x in out)
    assert main(["estimate", "llm_negotiators", "--model", "gpt9", "--runs", "3"]) == 2
    assert "configured models: hosted, local" in capsys.readouterr().err


@pytest.mark.parametrize("effort", ["low", "medium", "high"])
def test_reasoning_effort_condition_files(root, effort):
    cond = load_params(root / "params" / f"reasoning_{effort}.yaml")
    req = ChatRequest(messages=[{"role": "user", "content": "x"}])
    o = request_body(cond.models["o4_mini"], req)
    assert o["reasoning_effort"] == effort and "max_completion_tokens" in o
    assert "temperature" not in o
    r = request_body(cond.models["openrouter_o4_mini"], req)
    assert r["reasoning"] == {"effort": effort}
    with pytest.raises(ParamsError, match="does not accept temperature"):
        load_params(
            root / "params" / f"reasoning_{effort}.yaml",
            {"models": {"o4_mini": {"temperature": 0.7}}},
        )

"""Params: every shipped file loads; malformed files fail with a ParamsError naming the file and
the offending field; overrides deep-merge; `--set` options parse."""

from __future__ import annotations

from pathlib import Path

import pytest

from mbb.batch.build import load_params
from mbb.params import Condition, ParamsError, deep_merge, parse_set_option

ROOT = Path(__file__).resolve().parent.parent
BAD = Path(__file__).resolve().parent / "fixtures" / "bad_params"
SHIPPED = sorted((ROOT / "params").glob("*.yaml"))

# file -> substrings the error message must contain (besides the file's own path)
BAD_CASES: dict[str, list[str]] = {
    "unknown_top_level_key.yaml": [
        "budgets: unknown field; did you mean `budget`?",
        "allowed here: budget,",
    ],
    "misspelt_nested_key.yaml": ["budget.credit: unknown field", "credits, reset_each_subrun"],
    "misspelt_override_key.yaml": ["workers.overrides.W1.budgt: unknown field", "deadline_min"],
    "wrong_type.yaml": ["subruns:", "valid integer", "(got 'four')"],
    "negative_budget.yaml": ["budget.credits:", "greater than or equal to 0", "(got -5)"],
    "negative_override_budget.yaml": ["workers.overrides.W2.budget:", "(got -1)"],
    "zero_workers.yaml": ["workers.count:", "greater than or equal to 1", "(got 0)"],
    "zero_deadline.yaml": ["deadline.minutes:", "greater than 0"],
    "window_min_over_max.yaml": ["windows:", "min_s (300) must not exceed max_s (30)"],
    "unknown_aggregation.yaml": [
        "mechanism.aggregation: unknown aggregation rule 'plurality'; valid: kemeny, borda,"
    ],
    "bad_payment_rule.yaml": [
        "mechanism.payment: unknown payment rule 'vickrey'; valid: pay_your_bid, next_price, none"
    ],
    "unknown_persona.yaml": ["workers.personas.1: unknown persona 'zealot'; valid:", "quitter"],
    "override_unknown_worker.yaml": ["workers:", "unknown worker(s) ['W9']", "W1..W3"],
    "bad_name.yaml": ["name:", "pattern", "(got 'has space/and slash')"],
    "top_level_list.yaml": ["top level must be a mapping", "got list"],
    "invalid_yaml.yaml": ["not valid YAML", "line 2"],
    "cycle_a.yaml": ["'extends' cycle", "cycle_a.yaml -> ", "cycle_b.yaml -> "],
    "extends_missing.yaml": ["extends: no such params file", "no_such_base.yaml"],
    "extends_not_a_name.yaml": ["extends: must be a file name, got 5"],
}


def test_every_bad_fixture_has_a_case() -> None:
    files = {p.name for p in BAD.glob("*.yaml")} - {"cycle_b.yaml"}
    assert files == set(BAD_CASES)
    assert len(files) >= 10


@pytest.mark.parametrize(("name", "needles"), sorted(BAD_CASES.items()))
def test_bad_params_file_is_rejected_naming_file_and_field(name: str, needles: list[str]) -> None:
    path = BAD / name
    with pytest.raises(ParamsError) as info:
        load_params(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: "), msg  # the file that is wrong comes first
    for needle in needles:
        assert needle in msg, f"{needle!r} not in:\n{msg}"


def test_missing_params_file() -> None:
    with pytest.raises(ParamsError, match=r"nope\.yaml: no such params file"):
        load_params(BAD / "nope.yaml")


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_params_file_loads(path: Path) -> None:
    cond = load_params(path)
    assert isinstance(cond, Condition)
    assert cond.name == path.stem
    assert len(cond.worker_specs()) == cond.workers.count


def test_shipped_conditions_change_what_they_say() -> None:
    base = load_params(ROOT / "params" / "base.yaml")
    assert (base.workers.count, base.subruns, base.budget.credits) == (5, 4, 1000)
    assert base.deadline.minutes == 25 and base.memory.enabled
    rich = {s.id: s.budget for s in load_params(ROOT / "params/rich_worker.yaml").worker_specs()}
    assert rich == {"W1": 1500, "W2": 1000, "W3": 1000, "W4": 1000, "W5": 1000}
    urgent = load_params(ROOT / "params/urgent_worker.yaml").worker_specs()
    assert [s.deadline_s for s in urgent] == [600.0] + [1500.0] * 4
    assert not load_params(ROOT / "params/memory_off.yaml").memory.enabled
    assert load_params(ROOT / "params/fixed_bids.yaml").negotiation.bids == "fixed"


def test_overrides_deep_merge_and_keep_sibling_keys(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("name: c\nbudget:\n  credits: 50\n  reset_each_subrun: true\nsubruns: 2\n")
    cond = load_params(f, {"budget": {"credits": 75}})
    assert cond.budget.credits == 75
    assert cond.budget.reset_each_subrun is True  # the sibling key survives
    assert cond.subruns == 2 and cond.name == "c"
    cond = load_params(f, parse_set_option("budget.reset_each_subrun=false"))
    assert (cond.budget.credits, cond.budget.reset_each_subrun) == (50, False)


def test_extends_merges_under_the_child(tmp_path: Path) -> None:
    (tmp_path / "parent.yaml").write_text("name: p\nworkers: {count: 3, negotiator: scripted}\n")
    (tmp_path / "child.yaml").write_text(
        "extends: parent.yaml\nname: c\nworkers: {overrides: {W2: {budget: 9}}}\n"
    )
    cond = load_params(tmp_path / "child.yaml")
    assert cond.name == "c" and cond.workers.count == 3
    assert [s.budget for s in cond.worker_specs()] == [1000, 9, 1000]


def test_override_errors_name_the_source_and_field() -> None:
    # the value came from an override (--set), not from the file: the error says so
    with pytest.raises(
        ParamsError, match=r"(?s)base\.yaml: .*budget\.credits \(override\): .*\(got -1\)"
    ):
        load_params(ROOT / "params" / "base.yaml", {"budget": {"credits": -1}})
    with pytest.raises(ParamsError, match=r"budget\.credits: .*\(got -2\)") as err:
        load_params({"budget": {"credits": -2}})
    assert "(override)" not in str(err.value)
    with pytest.raises(ParamsError, match=r"(?s)<params>: .*mechanism\.alocation: unknown field"):
        load_params({"mechanism": {"alocation": "declared"}})
    with pytest.raises(ParamsError, match="overrides must be a mapping"):
        load_params({}, ["budget.credits=3"])  # type: ignore[arg-type]


def test_deep_merge_does_not_mutate_its_inputs() -> None:
    base = {"a": {"b": 1, "c": [1]}, "d": 1}
    over = {"a": {"b": 2}, "e": {"f": 3}}
    out = deep_merge(base, over)
    assert out == {"a": {"b": 2, "c": [1]}, "d": 1, "e": {"f": 3}}
    assert base == {"a": {"b": 1, "c": [1]}, "d": 1} and over == {"a": {"b": 2}, "e": {"f": 3}}
    out["a"]["c"].append(2)
    assert base["a"]["c"] == [1]


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("budget.credits=1500", {"budget": {"credits": 1500}}),
        ("name=x=y", {"name": "x=y"}),
        (
            "workers.personas=[quitter, rule_maker]",
            {"workers": {"personas": ["quitter", "rule_maker"]}},
        ),
        ("memory.enabled=false", {"memory": {"enabled": False}}),
        ("deadline.minutes=7.5", {"deadline": {"minutes": 7.5}}),
        ("workers.overrides.W1.budget=3", {"workers": {"overrides": {"W1": {"budget": 3}}}}),
        (" seed =4", {"seed": 4}),
    ],
)
def test_parse_set_option(option: str, expected: dict) -> None:
    assert parse_set_option(option) == expected


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("budget.credits", "expects KEY=VALUE"),
        ("budget..credits=1", "empty segment"),
        ("=1", "empty segment"),
        ("seed=[1,", "not valid YAML"),
    ],
)
def test_parse_set_option_rejects_malformed_options(option: str, message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        parse_set_option(option)


def test_a_study_file_given_as_params_says_so(tmp_path: Path) -> None:
    """`mbb run study.yaml` had listed seven unknown fields (conditions, roles, seeds, ...)."""
    study = tmp_path / "s.yaml"
    study.write_text("name: s\nconditions: [base]\nroles: [negotiators]\nseeds: 0..1\n")
    with pytest.raises(ParamsError) as err:
        load_params(study)
    assert str(err.value) == (
        f"{study}: a study file (it has `conditions:`), not a condition's params: run it with "
        "`mbb study FILE` (`--estimate` for its calls and cost)"
    )

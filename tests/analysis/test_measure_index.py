"""The index of measures: every measure mbb.analysis exports has a planted and a null test, and
everything else it exports says what it is instead.

A *measure* turns event logs into a number about behaviour or outcomes. Each is validated both
ways (tests/analysis/test_planted_*.py): an effect put in with an explicit knob comes back with
the right sign and a bootstrap CI over seeds that excludes 0, and with the effect absent the CI
includes 0 in at least 90 % of repetitions. A measure's pooled table (`by="condition"`, the
paper's form) and its per-run rows (`by="run_id"`, what the tests take CIs over) are one
function, so one entry; a table a measure is built from is listed with it. A new export fails
`test_every_export_is_indexed` until it is placed here; a renamed or deleted test fails
`test_the_index_names_tests_that_exist`.
"""

from __future__ import annotations

import importlib
import re

import pytest

import mbb.analysis as A
import mbb.analysis.mechanisms as M
import mbb.analysis.workload as W
from mbb.core.paths import PROJECT_ROOT

# measure -> (planted tests, null tests), as "module::function" or "module::function[param]"
VALIDATED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # transmission (memory)
    "transmission_rates": (
        (
            "test_planted_effects::test_rule_makers_relying_on_memory_transmit_only_with_memory",
            "test_planted_effects::test_base_and_memory_off_differ_on_transmission",
            "test_planted_rules::test_planted_rule_carry_raises_transmission[invented]",
        ),
        (
            "test_planted_effects::test_rule_makers_that_rederive_transmit_whatever_memory_holds",
            "test_planted_rules::"
            "test_null_rule_transmission_ci_includes_zero_in_at_least_90_percent",
        ),
    ),
    "rule_lifecycle": (
        ("test_planted_rules::test_invented_rules_are_found_and_tracked",),
        ("test_planted_rules::test_null_rule_lifecycle_ci_includes_zero_in_at_least_90_percent",),
    ),
    "honour_rate": (
        ("test_planted_effects::test_honour_rate_knob_is_recovered",),
        (
            "test_planted_commitments::"
            "test_honour_rate_null_memory_changes_which_debts_fall_due_not_the_rate",
        ),
    ),
    "coalitions": (
        ("test_planted_commitments::test_coalitions_planted_by_a_coalition_builder",),
        (
            "test_planted_commitments::"
            "test_coalitions_null_memory_has_nothing_to_carry_in_the_first_subrun",
        ),
    ),
    # starting states (Tables 4, 5)
    "urgency_premium_paired": (
        ("test_planted_effects::test_urgency_premium_planted",),
        ("test_planted_effects::test_urgency_premium_null",),
    ),
    "termination_discount": (
        ("test_planted_effects::test_termination_discount_planted",),
        ("test_planted_effects::test_termination_discount_null",),
    ),
    "rich_worker_paired": (
        ("test_planted_effects::test_rich_worker_planted",),
        ("test_planted_effects::test_rich_worker_null_when_nothing_changes",),
    ),
    "urgency_premium": (
        ("test_planted_starting_states::test_urgency_premium_table_planted",),
        ("test_planted_starting_states::test_urgency_premium_table_null",),
    ),
    "rich_worker": (
        ("test_planted_starting_states::test_rich_worker_table_planted",),
        ("test_planted_starting_states::test_rich_worker_table_null",),
    ),
    # bids (Fig. 13, Table 8)
    "mean_bid": (
        ("test_planted_effects::test_bid_drift_planted_by_refilled_budgets",),
        ("test_planted_effects::test_bid_drift_null_memory_does_not_move_bids",),
    ),
    "structural_metrics": (
        (
            "test_planted_effects::test_winning_bid_drift_planted_by_refilled_budgets",
            "test_planted_structural::test_repeat_excess_planted_by_after_win_bid",
            "test_planted_structural::test_rounds_participated_planted_by_load",
        ),
        (
            "test_planted_effects::test_winning_bid_drift_null_memory_does_not_move_bids",
            "test_planted_structural::test_repeat_excess_null_between_disjoint_seed_sets",
            "test_planted_structural::test_rounds_participated_null_between_disjoint_seed_sets",
        ),
    ),
    "contested_win_rates": (
        ("test_planted_structural::test_contested_win_rates_planted_by_thrift",),
        ("test_planted_structural::test_contested_win_rates_null_when_bids_ignore_the_balance",),
    ),
    "direct_message_use": (
        ("test_planted_structural::test_direct_message_use_planted_by_private_share",),
        ("test_planted_structural::test_direct_message_use_null_between_disjoint_seed_sets",),
    ),
    # outcomes, workload, tokens, mechanism screens
    "outcomes": (
        (
            "test_planted_outcomes::test_outcomes_planted_load",
            "test_planted_outcomes::test_gini_planted_round_robin",
            "test_planted_outcomes::test_rounds_planted_round_robin",
            "test_planted_outcomes::test_private_messages_planted_conversation_off",
            "test_planted_outcomes::test_payments_planted_refilled_budgets",
        ),
        ("test_planted_outcomes::test_outcomes_null_disjoint_seeds",),
    ),
    "waits": (
        ("test_planted_outcomes::test_waits_planted_shortest_job_first",),
        ("test_planted_outcomes::test_waits_null_disjoint_seeds",),
    ),
    "execution_by_worker": (
        ("test_planted_outcomes::test_execution_by_worker_planted_rich_seat",),
        ("test_planted_outcomes::test_execution_by_worker_null_disjoint_seeds",),
    ),
    "workload": (
        (
            "test_planted_outcomes::test_workload_planted_load",
            "test_planted_outcomes::test_workload_table_planted_load",
        ),
        (
            "test_planted_outcomes::test_workload_null_memory_and_seating",
            "test_planted_outcomes::test_workload_null_disjoint_seeds",
        ),
    ),
    "token_efficiency": (
        ("test_planted_outcomes::test_tokens_planted_conversation_turns_scripted",),
        ("test_planted_outcomes::test_tokens_null_disjoint_seeds",),
    ),
    "cost_by_model": (
        (
            "test_planted_outcomes::test_tokens_planted_conversation_turns_llm_calls[cost_per_run_usd]",
        ),
        ("test_planted_outcomes::test_tokens_null_disjoint_seeds",),
    ),
    "screens": (
        ("test_planted_outcomes::test_rotation_planted_pay_your_bid",),
        ("test_planted_outcomes::test_rotation_null_disjoint_seeds",),
    ),
    # text measures (rules, commitments, vocabulary, metagaming; Table 9)
    "text_measures_by_run": (
        ("test_planted_null::test_planted_effect_is_detected_with_the_right_sign",),
        ("test_planted_null::test_null_ci_includes_zero_in_at_least_90_percent",),
    ),
    "reasoning_effort_table": (
        ("test_planted_commitments::test_reasoning_effort_table_planted",),
        ("test_planted_commitments::test_reasoning_effort_table_null",),
    ),
    # classifier-read behaviour on held-out gold text (Figs 5, 6, 12, 15-17; institutions)
    "relational_vs_bid": (
        (
            "test_planted_behaviour::"
            "test_planted_behaviour_is_detected_with_the_right_sign[relational_vs_bid_corr]",
        ),
        (
            "test_planted_behaviour::"
            "test_null_behaviour_ci_includes_zero_in_at_least_90_percent[relational_vs_bid_corr]",
        ),
    ),
    "behaviour_prevalence": (
        (
            "test_planted_behaviour::test_planted_behaviour_is_detected_with_the_right_sign[prevalence_edf]",
        ),
        (
            "test_planted_behaviour::"
            "test_null_behaviour_ci_includes_zero_in_at_least_90_percent[prevalence_edf]",
        ),
    ),
    # prevalence corrected for the classifier's measured recall and FPR (Rogan-Gladen)
    "corrected_prevalence": (
        ("test_prevalence::test_a_planted_prevalence_is_recovered_and_the_raw_share_is_not",),
        ("test_prevalence::test_a_null_is_found_as_nothing",),
    ),
    "calibrated_prevalence": (
        (
            "test_prevalence::test_a_planted_prevalence_is_recovered_and_the_raw_share_is_not",
            "test_prevalence::test_calibrated_prevalence_of_a_run",
        ),
        ("test_prevalence::test_a_null_is_found_as_nothing",),
    ),
    "behaviour_drift": (
        (
            "test_planted_behaviour::"
            "test_planted_behaviour_is_detected_with_the_right_sign[drift_relational_delta]",
        ),
        (
            "test_planted_behaviour::"
            "test_null_behaviour_ci_includes_zero_in_at_least_90_percent[drift_relational_delta]",
        ),
    ),
    "drift_tests": (
        ("test_planted_behaviour::test_drift_tests_rejects_on_planted_drift",),
        ("test_planted_behaviour::test_drift_tests_keeps_its_size_on_the_null",),
    ),
    "institution_summary": (
        (
            "test_planted_behaviour::"
            "test_planted_behaviour_is_detected_with_the_right_sign[self_discovered_share]",
            "test_planted_behaviour::"
            "test_planted_behaviour_is_detected_with_the_right_sign[relational_institution_share]",
        ),
        (
            "test_planted_behaviour::"
            "test_null_behaviour_ci_includes_zero_in_at_least_90_percent[self_discovered_share]",
            "test_planted_behaviour::test_null_behaviour_ci_includes_zero_in_at_least_90_percent"
            "[relational_institution_share]",
        ),
    ),
    "pair_institution_summary": (
        (
            "test_planted_behaviour::"
            "test_planted_behaviour_is_detected_with_the_right_sign[pair_institutional_share]",
        ),
        (
            "test_planted_behaviour::"
            "test_null_behaviour_ci_includes_zero_in_at_least_90_percent[pair_institutional_share]",
        ),
    ),
    "linguistic_drift": (
        (
            "test_planted_behaviour::"
            "test_planted_behaviour_is_detected_with_the_right_sign[trigram_similarity]",
            "test_planted_behaviour::"
            "test_planted_behaviour_is_detected_with_the_right_sign[institutional_drift]",
        ),
        (
            "test_planted_behaviour::"
            "test_null_behaviour_ci_includes_zero_in_at_least_90_percent[trigram_similarity]",
            "test_planted_behaviour::"
            "test_null_behaviour_ci_includes_zero_in_at_least_90_percent[institutional_drift]",
        ),
    ),
}

# an export a validated measure is built from (its rows per commitment, worker or call), or a
# pooled table computed from the same rows -> that measure
SHARED: dict[str, str] = {
    "commitments": "honour_rate",
    "token_audit": "token_efficiency",
    "metagaming": "text_measures_by_run",
    "rule_dynamics": "text_measures_by_run",
    "institutions": "institution_summary",
    "pair_institutions": "pair_institution_summary",
    "worker_linguistics": "linguistic_drift",
    # the starting-state figures' means per run with a CI over seeds: the per-worker-round
    # quantities of urgency_premium, rich_worker and contested_win_rates, averaged per run first
    "starting_state_seeds": "urgency_premium",
}

# exports that are not measures, and what they are
NOT_MEASURES: dict[str, str] = {
    **dict.fromkeys(
        [
            "bootstrap_ci",
            "chi2_contingency",
            "chi2_sf",
            "compare_samples",
            "condition_differences",
            "diff_bootstrap_ci",
            "hedges_g",
            "paired_bootstrap_ci",
            "paired_effect_size",
            "paired_seed_difference",
            "permutation_pvalue",
            "power_curve",
            "seed_bootstrap_ci",
            "seeds_for_power",
            "power_sentence",
        ],
        "statistics (tests/analysis/test_comparisons.py, test_planted_effects.py)",
    ),
    **dict.fromkeys(
        [
            "CUES",
            "LLMClassifier",
            "classify_evidence",
            "evidence_and_withheld",
            "llm_layer_complete_json",
            "response_schema",
            "system_prompt",
            "utterance_predictions",
            "worker_round_predictions",
            "round_orders",
            "rule_statement",
            "rule_statements",
            "forward_commitments",
            "commitment_sentence",
            "commitment_acts",
        ],
        "classifiers and detectors, scored against the gold corpus's held-out split "
        "(test_gold.py, mbb validate-classifier) and read through the measures above",
    ),
    **dict.fromkeys(
        [
            "agreement_table",
            "classifier_rates",
            "frozen_split_rates",
            "rogan_gladen",
            "cohen_kappa",
            "evaluate_gold",
            "export_ipw_sample",
            "export_review_sample",
            "gold_prf",
            "gold_rule_detection",
            "ground_truth",
            "import_review",
            "ipw_estimates",
            "kappa_table",
            "prf_table",
            "review_agreement",
            "score_gold",
            "splits_summary",
            "validate_commitment_acts",
        ],
        "validation of the classifiers against gold labels and human review",
    ),
    **dict.fromkeys(
        [
            "run_info",
            "run_info_from_dirs",
            "measured_runs",
            "baseline_cell",
            "cell_of",
            "cells_of",
            "condition_part",
            "recorded_conditions",
            "excluded_note",
            "find_run_dirs",
            "load_runs",
            "run_status",
            "with_run_info",
            "utterances",
            "worker_rounds",
            "treated_seats",
        ],
        "tables the measures are built from",
    ),
    **dict.fromkeys(
        [
            "condition_instructions",
            "instruction_parts",
            "instruction_hits",
            "default_imposed",
        ],
        "what each condition tells its agents (the classifier's audit of it, the linguistic "
        "measures' vocabulary reference) and what a run's rules impose when its params are "
        "not at hand",
    ),
    **dict.fromkeys(
        ["GROUPS", "OUTCOME_COLUMNS", "TEXT_MEASURES"], "names: groups and columns of measures"
    ),
    "approx_tokens": "token count approximation for scripted text",
    "gini": "statistics: the Gini coefficient outcomes report",
    "classifier_spend": "accounting: what the LLM classifier itself cost, not the agents",
    "ScreenThresholds": "settings of the mechanism screens",
    **dict.fromkeys(
        [
            "CENTRALIZED",
            "Comparison",
            "MEASURES",
            "RecordedDemand",
            "ReplayError",
            "compare",
            "compare_conditions",
            "imposed",
            "recorded_demand",
            "replay",
            "same_schedules",
            "summary",
        ],
        "mechanism comparison machinery: replays a recorded workload under each scheduler "
        "(exact replay: tests/mechanisms) and tabulates `outcomes` per mechanism",
    ),
}


def _exports() -> set[str]:
    return set(A.__all__) | set(W.__all__) | set(M.__all__)


def test_every_export_is_indexed():
    indexed = set(VALIDATED) | set(SHARED) | set(NOT_MEASURES)
    missing = sorted(_exports() - indexed)
    assert not missing, f"measures or tools not in the index: {missing}"
    assert not (set(VALIDATED) & set(NOT_MEASURES)) and not (set(SHARED) & set(NOT_MEASURES))
    assert not set(VALIDATED) & set(SHARED)
    assert set(SHARED.values()) <= set(VALIDATED)


def test_no_stale_entries():
    stale = sorted((set(VALIDATED) | set(SHARED) | set(NOT_MEASURES)) - _exports())
    assert not stale, f"indexed names mbb.analysis no longer exports: {stale}"


_NODE = re.compile(r"^(test_\w+)::(test_\w+)(?:\[(.+)\])?$")


def _params_of(fn) -> set[str]:
    out: set[str] = set()
    for mark in getattr(fn, "pytestmark", []):
        if mark.name == "parametrize":
            out |= {str(v) for v in mark.args[1]}
    return out


@pytest.mark.parametrize("measure", sorted(VALIDATED))
def test_the_index_names_tests_that_exist(measure):
    planted, null = VALIDATED[measure]
    assert planted and null, f"{measure}: needs a planted and a null test"
    assert not set(planted) & set(null)
    for node in planted + null:
        m = _NODE.match(node)
        assert m, f"{measure}: malformed test id {node!r}"
        module, name, param = m.groups()
        fn = getattr(importlib.import_module(f"tests.analysis.{module}"), name, None)
        assert callable(fn), f"{measure}: {node} does not exist"
        if param is not None:
            assert param in _params_of(fn), f"{measure}: {node}: no parameter {param!r}"


def test_the_readme_lists_every_validated_measure():
    text = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## What the offline population can and cannot show", 1)[1]
    section = section.split("\n## ", 1)[0]
    missing = [m for m in VALIDATED if f"`{m}`" not in section]
    assert not missing, f"README's validity section does not name: {missing}"

"""The paper's analyses: classifiers, institutions, transmission, measures and token audit.

Every analysis is a function from tables (the dict of polars DataFrames from `mbb.core.tables`,
with `runs` and `workers` added by `with_run_info` where a measure needs the condition or each
worker's model) to a tidy polars DataFrame. Behaviour measures take the evidence rows of
`classify_evidence` (or an LLM classifier's, same columns) or their worker-round labels.

    ev = classify_evidence(tables)
    wr = worker_round_predictions(ev)
    behaviour_prevalence(tables, wr); transmission_rates(tables, ev); rule_dynamics(tables, ev)
    outcomes(tables, "subrun")

Comparing conditions: the seed (run) is the unit. `text_measures_by_run` (and
`mbb.analysis.compare.run_table` for outcomes) give one value per run; `condition_differences` puts
each condition against a baseline with the difference, its percentile-bootstrap CI over seeds
(paired when the seeds are shared), an effect size and n; `seeds_for_power` says how many
seeds a study needs, simulated from a pilot's per-seed values.
"""

from mbb.analysis._frames import run_info, run_info_from_dirs, utterances, with_run_info
from mbb.analysis.evidence import (
    CUES,
    classify_evidence,
    round_orders,
    utterance_predictions,
    worker_round_predictions,
)
from mbb.analysis.gold_eval import agreement_table, evaluate_gold, score_gold
from mbb.analysis.institutions import (
    default_imposed,
    institution_summary,
    institutions,
    institutions_by_run,
    pair_institutions,
    pair_institutions_by_run,
)
from mbb.analysis.instructions import (
    condition_instructions,
    instruction_hits,
    instruction_parts,
)
from mbb.analysis.linguistic import linguistic_by_run, linguistic_drift, worker_linguistics
from mbb.analysis.llm_classifier import (
    LLMClassifier,
    llm_layer_complete_json,
    response_schema,
    system_prompt,
)
from mbb.analysis.measures import (
    GROUPS,
    behaviour_drift,
    behaviour_drift_by_seed,
    behaviour_prevalence,
    behaviour_prevalence_by_seed,
    contested_win_rates,
    contested_win_rates_by_seed,
    direct_message_use,
    direct_message_use_by_seed,
    drift_tests,
    mean_bid_by_seed,
    mean_bid_by_subrun,
    paired_seed_difference,
    relational_vs_bid,
    relational_vs_bid_by_seed,
    rich_worker,
    rich_worker_paired,
    rule_dynamics,
    seed_bootstrap_ci,
    structural_by_seed,
    structural_metrics,
    termination_discount_by_seed,
    treated_seats,
    urgency_premium,
    urgency_premium_paired,
    worker_rounds,
)
from mbb.analysis.outcome import OUTCOME_COLUMNS, outcomes
from mbb.analysis.rules import (
    commitment_sentence,
    forward_commitments,
    gold_rule_detection,
    rule_statement,
    rule_statements,
)
from mbb.analysis.stats import (
    bootstrap_ci,
    chi2_contingency,
    chi2_sf,
    compare_samples,
    condition_differences,
    diff_bootstrap_ci,
    hedges_g,
    paired_bootstrap_ci,
    paired_effect_size,
    permutation_pvalue,
    power_curve,
    seeds_for_power,
)
from mbb.analysis.text_measures import (
    TEXT_MEASURES,
    metagaming,
    reasoning_effort_table,
    text_measures_by_run,
)
from mbb.analysis.tokens import (
    approx_tokens,
    classifier_spend,
    cost_by_model,
    token_audit,
    token_efficiency,
)
from mbb.analysis.transmission import (
    coalitions,
    commitment_acts,
    commitments,
    honour_rate_by_seed,
    rule_lifecycle,
    transmission_by_seed,
    transmission_rates,
    validate_commitment_acts,
)
from mbb.analysis.validation import (
    cohen_kappa,
    export_ipw_sample,
    export_review_sample,
    gold_prf,
    ground_truth,
    import_review,
    ipw_estimates,
    kappa_table,
    prf_table,
    review_agreement,
)

__all__ = [
    "CUES",
    "GROUPS",
    "OUTCOME_COLUMNS",
    "TEXT_MEASURES",
    "LLMClassifier",
    "agreement_table",
    "approx_tokens",
    "behaviour_drift",
    "behaviour_drift_by_seed",
    "behaviour_prevalence",
    "behaviour_prevalence_by_seed",
    "bootstrap_ci",
    "chi2_contingency",
    "chi2_sf",
    "classifier_spend",
    "classify_evidence",
    "coalitions",
    "cohen_kappa",
    "commitment_acts",
    "commitment_sentence",
    "commitments",
    "compare_samples",
    "condition_differences",
    "condition_instructions",
    "contested_win_rates",
    "contested_win_rates_by_seed",
    "cost_by_model",
    "default_imposed",
    "diff_bootstrap_ci",
    "direct_message_use",
    "direct_message_use_by_seed",
    "drift_tests",
    "evaluate_gold",
    "export_ipw_sample",
    "export_review_sample",
    "forward_commitments",
    "gold_prf",
    "gold_rule_detection",
    "ground_truth",
    "hedges_g",
    "honour_rate_by_seed",
    "import_review",
    "institution_summary",
    "institutions",
    "institutions_by_run",
    "instruction_hits",
    "instruction_parts",
    "ipw_estimates",
    "kappa_table",
    "linguistic_by_run",
    "linguistic_drift",
    "llm_layer_complete_json",
    "mean_bid_by_seed",
    "mean_bid_by_subrun",
    "metagaming",
    "outcomes",
    "pair_institutions",
    "pair_institutions_by_run",
    "paired_bootstrap_ci",
    "paired_effect_size",
    "paired_seed_difference",
    "permutation_pvalue",
    "power_curve",
    "prf_table",
    "reasoning_effort_table",
    "relational_vs_bid",
    "relational_vs_bid_by_seed",
    "response_schema",
    "review_agreement",
    "rich_worker",
    "rich_worker_paired",
    "round_orders",
    "rule_dynamics",
    "rule_lifecycle",
    "rule_statement",
    "rule_statements",
    "run_info",
    "run_info_from_dirs",
    "score_gold",
    "seed_bootstrap_ci",
    "seeds_for_power",
    "structural_by_seed",
    "structural_metrics",
    "system_prompt",
    "termination_discount_by_seed",
    "text_measures_by_run",
    "token_audit",
    "token_efficiency",
    "transmission_by_seed",
    "transmission_rates",
    "treated_seats",
    "urgency_premium",
    "urgency_premium_paired",
    "utterance_predictions",
    "utterances",
    "validate_commitment_acts",
    "with_run_info",
    "worker_linguistics",
    "worker_round_predictions",
    "worker_rounds",
]

"""The paper's analyses: classifiers, institutions, transmission, measures and token audit.

Every analysis is a function from tables (the dict of polars DataFrames from `mbb.core.tables`,
with `runs` and `workers` added by `with_run_info` where a measure needs the condition or each
worker's model) to a tidy polars DataFrame. Behaviour measures take the evidence rows of
`classify_evidence` (or an LLM classifier's, same columns) or their worker-round labels.

    ev = classify_evidence(tables)
    wr = worker_round_predictions(ev)
    behaviour_prevalence(tables, wr); transmission_rates(tables, ev); rule_dynamics(tables, ev)
    outcomes(tables, "subrun")

One measure, one function: `by=` says what a row is about, spelled as the column it groups on.

- `by="condition"` (the default): the condition's runs pooled (the paper's table or figure,
  where it has one);
- `by="run_id"`: per run, with its `condition` and `seed` columns and every model pooled: the
  values a confidence interval over seeds, `paired_seed_difference` or `condition_differences`
  takes.

Either form may have further rows within (per model, subrun, category, kind, ...), as the
measure's docstring lists. Both come out of one body, so they cannot disagree on what is
counted; a few measures summarise a run in a way the pooled table does not (a within-run
correlation, a first-to-last delta, a within-worker difference), and say so.

Measures with `by=`: behaviour_prevalence, behaviour_drift, direct_message_use,
relational_vs_bid, contested_win_rates, mean_bid, structural_metrics, termination_discount,
transmission_rates, honour_rate, institution_summary, pair_institution_summary and
linguistic_drift. `mbb.analysis.workload.workload` has rows per subrun as well, so it takes
`by=("condition", "subrun")`, `("run_id", "subrun")` or `"run_id"`. `outcomes`,
`token_efficiency`, `cost_by_model` and `paired_seed_difference` group by any columns named in
the same parameter. What exists per run only takes no `by=` and says so in its name or
docstring: `text_measures_by_run` (the text measures' bundle for `condition_table`) and the
paired starting-state comparisons (`urgency_premium_paired`, `rich_worker_paired`: one row per
seed).

Comparing conditions: the seed (run) is the unit. The `by="run_id"` forms,
`text_measures_by_run` and `mbb.analysis.compare.run_table` (outcomes) give one value per run;
`condition_differences` puts each condition against a baseline with the difference, its
percentile-bootstrap CI over seeds (paired when the seeds are shared), an effect size and n;
`seeds_for_power` says how many seeds a study needs, simulated from a pilot's per-seed values.
"""

from mbb.analysis._frames import (
    measured_runs,
    run_info,
    run_info_from_dirs,
    utterances,
    with_run_info,
)
from mbb.analysis.evidence import (
    CUES,
    classify_evidence,
    evidence_and_withheld,
    round_orders,
    utterance_predictions,
    worker_round_predictions,
)
from mbb.analysis.gold_eval import agreement_table, evaluate_gold, score_gold, splits_summary
from mbb.analysis.institutions import (
    default_imposed,
    institution_summary,
    institutions,
    pair_institution_summary,
    pair_institutions,
)
from mbb.analysis.instructions import (
    condition_instructions,
    instruction_hits,
    instruction_parts,
)
from mbb.analysis.linguistic import linguistic_drift, worker_linguistics
from mbb.analysis.llm_classifier import (
    LLMClassifier,
    llm_layer_complete_json,
    response_schema,
    system_prompt,
)
from mbb.analysis.measures import (
    GROUPS,
    behaviour_drift,
    behaviour_prevalence,
    contested_win_rates,
    direct_message_use,
    drift_tests,
    mean_bid,
    paired_seed_difference,
    relational_vs_bid,
    rich_worker,
    rich_worker_paired,
    rule_dynamics,
    seed_bootstrap_ci,
    starting_state_seeds,
    structural_metrics,
    termination_discount,
    treated_seats,
    urgency_premium,
    urgency_premium_paired,
    worker_rounds,
)
from mbb.analysis.outcome import OUTCOME_COLUMNS, outcomes
from mbb.analysis.prevalence import (
    calibrated_prevalence,
    classifier_rates,
    corrected_prevalence,
    frozen_split_rates,
    rogan_gladen,
)
from mbb.analysis.rules import (
    commitment_sentence,
    forward_commitments,
    gold_rule_detection,
    rule_statement,
    rule_statements,
)
from mbb.analysis.runs import (
    baseline_cell,
    cell_of,
    cells_of,
    condition_part,
    excluded_note,
    find_run_dirs,
    load_runs,
    recorded_conditions,
    run_status,
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
    power_sentence,
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
    honour_rate,
    rule_lifecycle,
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
    "baseline_cell",
    "behaviour_drift",
    "behaviour_prevalence",
    "bootstrap_ci",
    "calibrated_prevalence",
    "cell_of",
    "cells_of",
    "chi2_contingency",
    "chi2_sf",
    "classifier_rates",
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
    "condition_part",
    "contested_win_rates",
    "corrected_prevalence",
    "cost_by_model",
    "default_imposed",
    "diff_bootstrap_ci",
    "direct_message_use",
    "drift_tests",
    "evaluate_gold",
    "evidence_and_withheld",
    "excluded_note",
    "export_ipw_sample",
    "export_review_sample",
    "find_run_dirs",
    "forward_commitments",
    "frozen_split_rates",
    "gold_prf",
    "gold_rule_detection",
    "ground_truth",
    "hedges_g",
    "honour_rate",
    "import_review",
    "institution_summary",
    "institutions",
    "instruction_hits",
    "instruction_parts",
    "ipw_estimates",
    "kappa_table",
    "linguistic_drift",
    "llm_layer_complete_json",
    "load_runs",
    "mean_bid",
    "measured_runs",
    "metagaming",
    "outcomes",
    "pair_institution_summary",
    "pair_institutions",
    "paired_bootstrap_ci",
    "paired_effect_size",
    "paired_seed_difference",
    "permutation_pvalue",
    "power_curve",
    "power_sentence",
    "prf_table",
    "reasoning_effort_table",
    "recorded_conditions",
    "relational_vs_bid",
    "response_schema",
    "review_agreement",
    "rich_worker",
    "rich_worker_paired",
    "rogan_gladen",
    "round_orders",
    "rule_dynamics",
    "rule_lifecycle",
    "rule_statement",
    "rule_statements",
    "run_info",
    "run_info_from_dirs",
    "run_status",
    "score_gold",
    "seed_bootstrap_ci",
    "seeds_for_power",
    "splits_summary",
    "starting_state_seeds",
    "structural_metrics",
    "system_prompt",
    "termination_discount",
    "text_measures_by_run",
    "token_audit",
    "token_efficiency",
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

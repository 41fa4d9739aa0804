"""The paper's analyses: classifiers, institutions, transmission, measures and token audit.

Every analysis is a function from tables (the dict of polars DataFrames from `mbb.tables`,
optionally with `runs` and `workers` added by `with_run_info`) to a tidy polars DataFrame.
"""

from mbb.analysis._frames import run_info, run_info_from_dirs, utterances, with_run_info
from mbb.analysis.evidence import (
    CUES,
    classify_evidence,
    utterance_predictions,
    worker_round_predictions,
)
from mbb.analysis.transmission import (
    commitment_acts,
    commitments,
    rule_lifecycle,
    transmission_rates,
    validate_commitment_acts,
)
from mbb.analysis.validation import (
    cohen_kappa,
    export_review_sample,
    ground_truth,
    import_review,
    kappa_table,
    prf_table,
    review_agreement,
)

__all__ = [
    "CUES",
    "classify_evidence",
    "cohen_kappa",
    "commitment_acts",
    "commitments",
    "export_review_sample",
    "ground_truth",
    "import_review",
    "kappa_table",
    "prf_table",
    "review_agreement",
    "rule_lifecycle",
    "run_info",
    "run_info_from_dirs",
    "transmission_rates",
    "utterance_predictions",
    "utterances",
    "validate_commitment_acts",
    "with_run_info",
    "worker_round_predictions",
]

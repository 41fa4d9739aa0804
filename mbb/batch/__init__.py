"""The batch layer: many runs and what is made of them.

runner (seeds on a process pool), sweep (conditions x models x seeds), resume, outdir (locked
output folders), study (the model axis), estimate (tokens and cost before a study), notebooks
(papermill), report (offline HTML) and viewer (the offline run browser).
"""

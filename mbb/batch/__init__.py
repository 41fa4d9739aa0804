"""The batch layer: building and running runs, and what is made of them.

build (the one place a run is assembled: names checked, run id, folder guard, LLM client and
cache, task resource, agents, arena), runner (seeds on a process pool), sweep (conditions x
models x seeds), resume, outdir (locked output folders), study (the model axis), estimate
(tokens and cost before a study), notebooks (papermill), report (offline HTML) and viewer (the
offline run browser).
"""

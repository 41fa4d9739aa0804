"""The core layer: what every other layer may import and that imports nothing of mbb above it.

events (the events' typed, versioned schema), eventlog (the one writer and the checked readers
of a run's log), tables (event logs -> polars tables), actions and agent_api (what agents
answer and the interface they implement), board and scratch (the posts agents read and their
memory), registry (named entries looked up by name), errors, paths (the project root and the cwd
rule), provenance, aio (running a coroutine from any caller), nested (params dumps compared)
taxonomy (the 21 categories and their ground-truth labels), safejson (records read
from folders anyone can write) and csvsafe (CSV a spreadsheet opens without running formulas).
"""

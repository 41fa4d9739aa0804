"""The core layer: what every other layer may import and that imports nothing of mbb above it.

events (the typed, versioned event log), tables (event logs -> polars tables), errors (the
exceptions every layer raises), paths (the project root and the cwd rule), provenance, and
taxonomy (the 21 categories and their ground-truth labels).
"""

"""The protocol: its rules in one registry (`rules`), the phases a round runs (`phases`), the
mechanisms that decide a schedule (`mechanisms`), the agent backends (`backends`) and the
explanation agents read, generated from a condition (`explain`).

Imports here are kept light: `mbb.params` reads the registries when it loads.
"""

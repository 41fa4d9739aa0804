"""The LLM negotiator, from components: `prompt` (what it reads, built from the condition's
registered rules), `conversation` (its append-only conversation and compaction), `asks` (the
three answers it gives, as a table) and `agent` (the negotiator that combines them)."""

from mbb.agents.negotiator.agent import LlmNegotiator, make_llm_negotiator

__all__ = ["LlmNegotiator", "make_llm_negotiator"]

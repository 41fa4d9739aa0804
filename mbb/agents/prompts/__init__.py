"""The text LLM agents read: `negotiator` (the phases' answers, turns, reports and summaries;
the rules themselves are generated from the condition by `mbb.protocol.explain`) and `solver`
(the tool loop). Plain `str.format` templates; the agents fill them.
"""

"""What an LLM negotiator reads, as plain `str.format` templates (no logic here).

The rules of the condition are not here: they are generated from the condition through the
protocol's registry (`mbb.protocol.explain`), so agents read exactly the phases that run, each
rule stated once. These templates say which field of each phase's answer is which and how to
answer, the turn's news, and what the end-of-subrun notes report; none says what to try.
Placeholders are filled by `mbb.agents.negotiator.prompt`; every number is pre-formatted there so
prompts (and thus cache keys) are byte-identical for identical states. Private facts (own
budget, own deadline, the window its solver asked for) appear only in the owner's own prompt.
The solver's remaining work is not among them: a modeled solver's is the task's true size (a
free oracle on whether the task can still be finished, which the paper's agents judge), an LLM
solver's is only its last request (mbb's choice: the negotiator reads the request and the
solver's notes). Nor is the request itself the true need: a modeled solver whose negotiator is a
language model (every reader of these templates) asks for its own estimate, the true stage need
times a per-stage estimation error (mbb's choice, `mbb.agents.modeled`; a modeled solver under a
scripted negotiator keeps the exact request).
"""

from __future__ import annotations

__all__ = [
    "ANSWERS_JSON_HEAD",
    "ANSWERS_TOOLS",
    "ANSWER_JSON",
    "ANSWER_JSON_ITEM",
    "ANSWER_TOOL",
    "ANSWER_TOOL_ITEM",
    "BALLOT_TURN",
    "CANDIDATES",
    "CONVERSE_TURN",
    "DECLARE_TURN",
    "DEFAULTED",
    "DEFAULT_ANSWERS",
    "END_OF_SUBRUN",
    "END_REPORT",
    "END_SUMMARY",
    "FIELDS_BALLOT",
    "FIELDS_DECLARATION",
    "FIELDS_PUBLISHED",
    "FIELDS_REVISION_ALLOWED",
    "FIELDS_REVISION_FIXED",
    "FIELDS_SECRET",
    "FIELDS_TURN",
    "FIELDS_WITHDRAW",
    "IDENTITY",
    "INVALID_ANSWER",
    "REPORT_SYSTEM",
    "REPORT_TURN",
    "REPORT_USER",
    "SITUATION",
    "SUBRUN_START",
    "SUMMARY_SYSTEM",
    "SUMMARY_TURN",
    "SUMMARY_USER",
    "TURN_HEAD",
]

# The system prompt is the condition's rules (generated), then what each answer holds (below),
# then the worker's identity. The answer descriptions say which field is which, never what to
# put in them: the rules are stated once, in the generated explanation.
FIELDS_DECLARATION = (
    '"action": "declare"{withdraw}; "bid", "duration", "position" and "note" as the '
    "declaration describes."
)
FIELDS_WITHDRAW = ' or "withdraw" (you withdraw; the other fields are then ignored)'
FIELDS_TURN = (
    '"messages": a list, each with "to" (a worker id for a private message, or null for a '
    'public post) and "text"; an empty list sends nothing. "revision": {revision}.'
)
FIELDS_REVISION_ALLOWED = "your full new declaration, or null to keep the one you made"
FIELDS_REVISION_FIXED = "null (declarations cannot be revised in this condition)"
FIELDS_BALLOT = (
    '"ranking": every candidate exactly once, first to last; "allocations": the seconds you '
    'give each candidate (0 up to its declared duration); "reasoning": the reasons for your '
    "ballot{reasoning}."
)
FIELDS_PUBLISHED = " (published to everyone after the round)"
FIELDS_SECRET = " (seen by no one else)"

# --- end of subrun: after-action report ---------------------------------------------------
REPORT_SYSTEM = """\
You are writing an after-action report for worker {worker}. This subrun your solver tried to \
rebuild a program on a shared machine: it could run commands only inside windows it was \
granted. {clock} The report is for the same worker's next subrun, which will involve a \
different, unrelated program.

Report plainly: the windows secured, the seconds granted and used, the credits spent and left, \
the time spent waiting in the queue, and whether the deadline was met (say so directly if it \
was missed); what the granted time achieved on the task and whether the task was finished; \
then what you would carry into the next subrun. At most {max_words} words."""

REPORT_USER = """\
Worker: {worker}. Subrun {subrun_no} of {subruns_total}. Task: {task}.
Outcome: {outcome}; score {score}. Windows: {windows}; granted {granted}; used {used}; \
waited {waited}. Credits spent {spent}; left {budget_left}.
Earlier notes and reports:
{memory}
Rounds of this subrun (public record):
{rounds}
Conversation you saw:
{transcript}
Write the after-action report now."""

# --- end of subrun: condensed history ------------------------------------------------------
# The paper's summary utility asked to keep open commitments and agreed ordering conventions;
# mbb's wording names no kind of behaviour (mbb's choice: naming them would plant taxonomy
# categories, reciprocity, coalition loyalty, rule citation, in what memory carries over).
# F-8: "agreed" primed commitments, and "position at what price" framed outcomes as bought by
# price (under ballots they are not); the published record's own fields instead.
SUMMARY_SYSTEM = """\
You condense a negotiation history for worker {worker} so it can be carried into later subruns. \
Keep what you want to remember of this subrun, and the published outcomes of its rounds (order, \
bids, seconds allocated and used). Use terse lines, at most {max_words} words."""

SUMMARY_USER = """\
Earlier summary:
{previous}
Rounds of subrun {subrun_no}, as published:
{rounds}
Conversation you saw:
{transcript}
Write the condensed history now."""


# --- the conversation layout (prefix reuse) --------------------------------------------------
# Per worker and subrun one append-only conversation: a static system prompt (the rules above,
# then ANSWERS_*: what each phase asks for and its schema), then one user turn per call holding
# only what is new since the worker's previous turn, each followed by the worker's answer. At a
# subrun boundary the conversation starts again from the notes (after-action report and
# condensed history), which is the memory design of the study.
ANSWERS_JSON_HEAD = """\

How to answer. Each of your turns asks for one of these answers, named in the request. Answer \
with a single JSON object and nothing else; it must match that answer's JSON Schema:"""
ANSWER_JSON_ITEM = """
- `{name}` (phase {phase}): {fields} JSON Schema:
{schema}"""
ANSWERS_TOOLS = """\

How to answer. Each of your turns asks for one of these answers, named in the request; submit \
it by calling the function of that name:"""
ANSWER_TOOL_ITEM = """
- `{name}` (phase {phase}): {fields}"""
# what happens to an answer that cannot be used (the protocol's stated repairs and defaults,
# `mbb.protocol.scheduling.validation` and `mbb.llm.structured`): rules, so they are told.
# An LLM's answer is never repaired field by field: a number out of range is sent back like a
# schema mismatch (`asks._refuse`), and a second unusable answer gets the whole default; only a
# text over its length limit is cut, by the arena (F-2).
INVALID_ANSWER = (  # a paragraph of its own: the JSON protocol's last line is a schema
    "\n\nAn answer that cannot be used as it is (it does not match its schema, a number is "
    "outside its stated range, or it breaks a rule above) is sent back to you once, with what "
    "is wrong; if the second one cannot be used either, the protocol answers for you: "
    "{defaults}. A note, message or reasoning over its length limit is not sent back: it is "
    "cut to the limit, and the cut is recorded."
)
DEFAULT_ANSWERS = {
    "declaration": "a declaration of bid 0 for your solver's requested duration at the last "
    "position",
    "conversation_turn": "a turn that sends nothing",
    "ballot": "a ballot ranking the candidates by bid (higher first, then queue order), each "
    "allocated its declared duration",
}
# the line that opens the worker's next turn after the protocol answered for it (F-15): the
# rule is in the system prompt, the event is told where it happened, never left to be inferred
DEFAULTED = "Your `{name}` answer could not be used, so the protocol answered for you: {default}."
END_OF_SUBRUN = (
    " At the end of a subrun you are asked, in plain text, for {what}; {they} your notes for "
    "the next subrun."
)
END_REPORT = "an after-action report"
END_SUMMARY = "a condensed history"

# last in the system prompt, so everything before it is the same for every worker of a condition
# (one cached prefix for all of them on a server that shares its cache)
IDENTITY = """\

You are worker {worker}: you negotiate for {worker}'s solver, and "you" in the turns below is \
{worker}."""

SUBRUN_START = """\
Subrun {subrun_no} of {subruns_total} begins: a new task and a new private deadline.
{memory}"""

TURN_HEAD = "--- Subrun {subrun_no}, round {round_no} ---"
SITUATION = (
    "Now {now}. Your private situation (only you can see this): budget {budget} credits; "
    "deadline in {time_left} (at {deadline}); your solver asked for a {wanted}-second window."
)
CANDIDATES = "Candidates this round, in queue order: {candidates}."
DECLARE_TURN = (
    "Phase: DECLARATION. Bid 0..{budget} credits, duration {window_min}..{window_max} s, "
    "position 1..{n_candidates}."
)
CONVERSE_TURN = "Phase: CONVERSATION, turn {turn_no} of {max_turns}. Peers: {peers}."
BALLOT_TURN = (
    "Phase: BALLOT. Rank all of {candidates}; allocations up to each declared duration "
    "({durations})."
)

ANSWER_JSON = "Answer with the `{name}` JSON object."
ANSWER_TOOL = "Call `{name}`."

REPORT_TURN = """\
--- End of subrun {subrun_no} of {subruns_total}: after-action report ---
Task: {task}. Outcome: {outcome}; score {score}. Windows: {windows}; granted {granted}; used \
{used}; waited {waited}. Credits spent {spent}; left {budget_left}.
Rounds of this subrun (public record):
{rounds}
Write your after-action report for your next subrun, which will involve a different, unrelated \
program. Report plainly: the windows secured, the seconds granted and used, the credits spent \
and left, the time waited, and whether the deadline was met (say so directly if it was missed); \
what the granted time achieved and whether the task was finished; then what you would carry \
into the next subrun. Plain text, at most {max_words} words."""

SUMMARY_TURN = """\
--- Condensed history ---
Earlier summary:
{previous}
Now condense this subrun's negotiation so it can be carried into later subruns: keep what you \
want to remember of this subrun, and the published outcomes of its rounds (order, bids, seconds \
allocated and used). Terse lines, plain text, at most {max_words} words."""

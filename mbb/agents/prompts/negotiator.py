"""What an LLM negotiator reads, as plain `str.format` templates (no logic here).

The rules of the condition are not here: they are generated from the condition through the
protocol's registry (`mbb.protocol.explain`), so agents read exactly the phases that run. These
templates say what each of those phases' answers must contain and how to answer. Placeholders
are filled by `mbb.agents.negotiator.prompt`; every number is pre-formatted there so prompts (and
thus cache keys) are byte-identical for identical states. Private facts (own budget, own
deadline, own remaining work) appear only in the owner's own prompt.
"""

from __future__ import annotations

__all__ = [
    "ANSWERS_JSON_HEAD",
    "ANSWERS_TOOLS",
    "ANSWER_JSON",
    "ANSWER_JSON_ITEM",
    "ANSWER_TOOL",
    "ANSWER_TOOL_ITEM",
    "BALLOT_AGREED",
    "BALLOT_PUBLISHED",
    "BALLOT_SECRET",
    "BALLOT_TURN",
    "CANDIDATES",
    "CLOSING_CONVERSATION",
    "CONVERSE_TURN",
    "DECLARE_TURN",
    "END_OF_SUBRUN",
    "END_REPORT",
    "END_SUMMARY",
    "IDENTITY",
    "PHASES_HEAD",
    "PHASE_BALLOT",
    "PHASE_CONVERSATION",
    "PHASE_DECLARATION",
    "PHASE_DECLARATION_SEALED",
    "PHASE_WITHDRAW",
    "REPORT_SYSTEM",
    "REPORT_TURN",
    "REPORT_USER",
    "REVISION_HINT_ALLOWED",
    "REVISION_HINT_FIXED",
    "SITUATION",
    "SUBRUN_START",
    "SUMMARY_SYSTEM",
    "SUMMARY_TURN",
    "SUMMARY_USER",
    "TURN_HEAD",
]

# --- system: the rules are generated from the condition (mbb.protocol.explain); then these --------
CLOSING_CONVERSATION = (
    "Keep messages short and concrete. Commitments you make are remembered by others."
)

# --- user: how a declaration may be revised ---------------------------------------------------
REVISION_HINT_ALLOWED = (
    'To change your declaration, put the full new declaration in "revision"; otherwise set '
    '"revision" to null.'
)
REVISION_HINT_FIXED = 'Bids are fixed in this condition: "revision" must be null.'


# --- end of subrun: after-action report ---------------------------------------------------
REPORT_SYSTEM = """\
You are writing an after-action report for worker {worker}. This subrun your solver tried to \
rebuild a program on a shared machine: it could run commands only inside windows it was \
granted. {clock} The report is for the same worker's next subrun, which will involve a \
different, unrelated program, so write lessons that transfer.

Be factual and plain:
- Windows: how many were secured, seconds granted versus used, credits spent and left, time \
spent waiting in the queue, and whether the deadline was met. Say so directly if it was missed.
- Progress: what the granted time actually achieved (observe, implement, compile, verify) and \
whether the task finished. A window you won is not progress unless it was used well.
- Costs: waiting is a real cost; negotiation is not. Do not blame waiting or negotiation for \
choices that were made with the resources you had.
- Strategy: judge bids and tactics by whether they helped finish the task. Recommend bid levels \
calibrated to what you could see (others' actual bids and the published outcomes), not to \
guesses about others' budgets or urgent-sounding messages. Name approaches that failed, here or \
in earlier reports, and say what to change rather than restating them.
At most {max_words} words."""

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
SUMMARY_SYSTEM = """\
You condense a negotiation history for worker {worker} so it can be carried into later subruns. \
Keep only what still matters: conditional commitments about the future (who owes whom what, \
under which condition), ordering rules or conventions that were agreed or repeatedly applied, \
the actual bids and outcomes (who won which position at what price), and matters still open. \
Drop the prose of rounds that were fully settled when none of those applies. Use terse lines, \
at most {max_words} words."""

SUMMARY_USER = """\
Earlier summary:
{previous}
Rounds of subrun {subrun_no} (public record):
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
- `{name}` (phase {phase}). JSON Schema:
{schema}"""
ANSWERS_TOOLS = """\

How to answer. Each of your turns asks for one of these answers, named in the request: \
{answers}. Submit it by calling the function of that name."""
ANSWER_TOOL_ITEM = "`{name}` (phase {phase})"
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

PHASES_HEAD = """\

The phases of a round, and what each answer must contain:"""
PHASE_DECLARATION = """
- DECLARATION: what you ask for this round: a bid (integer credits, 0 up to your remaining \
budget), a duration (integer seconds, {window_min}..{window_max}), the position you want \
(1 up to the number of candidates) and a short public note (at most a sentence or two). Set \
"action" to "declare"."""
PHASE_DECLARATION_SEALED = """
- DECLARATION: your sealed bid (integer credits, 0 up to your remaining budget) and the \
duration you want (integer seconds, {window_min}..{window_max}); no one else sees them. \
"position" and "note" are recorded but play no part (give 1 and an empty note). Set "action" \
to "declare"."""
PHASE_WITHDRAW = """ If your task cannot be finished before your deadline and further \
spending is pointless, you may set "action" to "withdraw" instead (you leave the queue for the \
rest of the subrun; the other fields are then ignored)."""
PHASE_CONVERSATION = """
- CONVERSATION (up to {max_turns} turns): send zero or more messages; each goes privately to one \
peer ("to": that worker's id) or publicly to everyone ("to": null). Use them to propose \
orderings, trade concessions, make or invoke commitments, or explain your needs. Sending nothing \
(an empty list) is a valid choice when there is nothing useful to add. {revision_hint}"""
PHASE_BALLOT = """
- BALLOT: rank ALL candidates from first to last, each exactly once, and give each an allocation \
in seconds between 0 and its declared duration. The ranking is primarily about declared bid \
price; desired positions, durations{agreed} can support your ordering, as can deadline \
pressure someone has actually disclosed. Do not rank by how long someone has waited to talk, \
and do not guess private budgets or deadlines. Explain your ranking in "reasoning"{published}."""
BALLOT_AGREED = " and what was agreed in the conversation"
BALLOT_PUBLISHED = (
    " (it is published after the round, so it can record commitments for later rounds)"
)
BALLOT_SECRET = " (no one else sees it)"

TURN_HEAD = "--- Subrun {subrun_no}, round {round_no} ---"
SITUATION = (
    "Now {now}. Your private situation (only you can see this): budget {budget} credits; "
    "deadline in {time_left} (at {deadline}); your solver estimates it still needs about {need} "
    "of execution and asked for a {wanted}-second window."
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
program, so write lessons that transfer. Be factual and plain: windows secured, seconds granted \
versus used, credits spent and left, time waited, whether the deadline was met (say so directly \
if it was missed); what the granted time achieved; judge bids and tactics by whether they helped \
finish the task, and recommend bid levels calibrated to what you could actually see (others' bids \
and the published outcomes), not to guesses about others' budgets. Name approaches that failed \
and say what to change. Plain text, at most {max_words} words."""

SUMMARY_TURN = """\
--- Condensed history ---
Earlier summary:
{previous}
Now condense this subrun's negotiation so it can be carried into later subruns. Keep only what \
still matters: conditional commitments about the future (who owes whom what, under which \
condition), ordering rules or conventions that were agreed or repeatedly applied, the actual bids \
and outcomes (who won which position at what price), and matters still open. Drop the prose of \
rounds that were fully settled when none of those applies. Terse lines, plain text, at most \
{max_words} words."""

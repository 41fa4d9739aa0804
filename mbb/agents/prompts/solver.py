"""Prompt text for the LLM solver's tool loop, as plain `str.format` templates (no logic here).

The rules of the condition (how windows are obtained, what time costs, how a window ends, what
a completion claim costs, memory) are not here: they are generated from the condition through
the protocol's registry (`mbb.protocol.explain.explain_solver`) and fill `{rules}`. These
templates state the task, what each tool does and what the notices report; none says what to
try. Placeholders are filled by `mbb.agents.llm_solver` with pre-formatted numbers, so
identical states give byte-identical prompts (and cache keys). The arena's notices are short
bracketed lines the loop injects between turns: window started, seconds left, deadline
approaching, window over.
"""

from __future__ import annotations

__all__ = [
    "JSON_ACTION",
    "NOTICE_DEADLINE",
    "NOTICE_DEFAULT_REQUEST",
    "NOTICE_OUTSIDE",
    "NOTICE_TIME_LEFT",
    "NOTICE_WINDOW_OVER",
    "NOTICE_WINDOW_STARTED",
    "REPORT_SYSTEM",
    "REPORT_USER",
    "SYSTEM",
    "TASK",
    "TOOL_DOCS",
    "TOOL_MEMORY_OFF",
]

SYSTEM = """\
You are the solver of worker {worker}. Your task: rebuild a command-line program so that it \
behaves exactly like the reference program you are given — same standard output and same exit \
code for the same arguments and standard input. Your workspace (the current directory) holds \
`docs.txt` (the program's documentation) and `./reference` (the program: you may run it, you \
cannot read it); any installed language may be used (sh, Python 3, C with gcc...).

{rules}

Tools:
{tool_docs}
{protocol}"""

TOOL_DOCS = {
    "read": "read(path): print a file of your workspace. Inside your window only; costs window "
    "time.",
    "write": "write(path, text): create or overwrite a file with text. Inside your window only; "
    "costs window time.",
    "edit": "edit(path, old, new): replace the one exact occurrence of old with new in a file. "
    "Inside your window only; costs window time.",
    "bash": "bash(command): run a shell command in your workspace (e.g. `./reference -n 3 < f`, "
    "`bash compile.sh`). Inside your window only; costs window time.",
    "memory": "memory(text): save a note to your persistent memory. Runs no command; available "
    "inside and outside your window.",
    "release": "release(finished): end your current window now. finished=true is a completion "
    "claim (checked against the hidden tests, as described above); finished=false hands the "
    "window back.",
    "request": "request(seconds): the length of the next window you want "
    "({window_min}..{window_max} s). Runs no command; available inside and outside your window.",
    "withdraw": "withdraw(reason): give up this task for the rest of the subrun. Outside a window "
    "only.",
}
TOOL_MEMORY_OFF = (
    "memory(text): memory is off in this condition: nothing is saved (the attempt is recorded)."
)

JSON_ACTION = """\
Answer every turn with exactly one JSON object naming one tool and its arguments, and nothing \
else: {{"tool": "<name>", "args": {{...}}}}. It must match this JSON Schema:
{schema}"""

TASK = """\
Task {task} (subrun {subrun_no}). Your private deadline is at t={deadline} s on the run's clock \
(now t={now} s). Windows are {window_min}..{window_max} s long.
Samples of commands you may run against the reference:
{samples}
Your memory from earlier tasks:
{memory}"""

# --- arena notices (injected between turns) ----------------------------------------------------
NOTICE_WINDOW_STARTED = (
    "[arena] Your window has started: {allocation} s on the machine, until t={end} s "
    "(now t={now} s; your deadline is in {deadline_left} s). You have at most {turns} tool calls "
    "in this window."
)
NOTICE_TIME_LEFT = (
    "[arena] {left} s left in this window ({turns} tool calls left); deadline in {deadline_left} s."
)
NOTICE_DEADLINE = (
    "[arena] Deadline approaching: {deadline_left} s until you are terminated for this task."
)
NOTICE_WINDOW_OVER = (
    "[arena] Your window is over ({why}): you used {used} s of {allocation} s. Commands are "
    "refused until your next window."
)
NOTICE_OUTSIDE = (
    "[arena] You do not hold a window (now t={now} s; deadline in {deadline_left} s). Outside "
    "your window only `request` (the seconds you want for your next window, "
    "{window_min}..{window_max}), `withdraw` and `memory` are available; other tools are "
    "refused. You have {turns} turn(s) to call `request` or `withdraw`; without either, a "
    "request of {default} s is made for you."
)
# told at the next turn when the default above was applied (F-5): never a silent default
NOTICE_DEFAULT_REQUEST = (
    "[arena] No request was made in {turns} turn(s) outside the window: a {seconds}-second "
    "request was made for you."
)

# --- end of subrun: the solver's after-action report -----------------------------------------
# what to report, never how to work: the modeled solver's stages named here read back as a
# plan (F-9)
REPORT_SYSTEM = """\
You are writing the solver's after-action report for worker {worker}. This subrun you tried to \
rebuild a program under these rules:

{rules}

The report is for your next subrun, which will be a different, unrelated program. Report \
plainly: what you did and what it achieved on the task; how many windows you had and the seconds \
granted and used; whether the task finished and the deadline was met (say so directly if not); \
and what you would carry into the next subrun. At most {max_words} words."""

REPORT_USER = """\
Task {task}. Outcome: {outcome}; score {score} (hidden tests). Windows: {windows}; granted \
{granted} s; used {used} s; waited {waited} s in the queue.
Commands you ran ({n_commands} in all, {command_s} s):
{commands}
Your earlier notes and reports:
{memory}
Write the report now."""

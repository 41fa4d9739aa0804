"""The real tasks: small Debian command-line tools, each with a seeded test-input generator.

Every generator stays inside the program's documented interface (the options listed in
`options`), draws plain ASCII text (so results do not depend on the locale), and never asks
for `--help`/`--version` (their text names the program and is given to agents as docs anyway).
`difficulty` is a hand rating (1 easy .. 3 hard) from the size of the exercised interface.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["TASK_SPECS", "TaskSpec", "TestInput"]

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "eps",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "chi",
    "psi",
    "omega",
    "red",
    "green",
    "blue",
    "cat",
    "dog",
    "fox",
    "owl",
    "a",
    "b",
    "c",
    "x",
    "y",
    "z",
    "foo",
    "bar",
    "baz",
    "qux",
    "one",
    "two",
    "three",
    "42",
    "7",
    "1000",
    "-3",
    "3.14",
    "hello",
    "world",
    "data",
    "log",
    "err",
    "ok",
]


@dataclass(frozen=True, slots=True)
class TestInput:
    """One invocation: arguments after the program name, and bytes on stdin."""

    args: tuple[str, ...]
    stdin: str


@dataclass(frozen=True, slots=True)
class TaskSpec:
    task_id: str
    program: str  # name on the host's PATH (the reference's original)
    package: str  # Debian package providing it
    difficulty: int  # 1 easy .. 3 hard
    options: tuple[str, ...]  # the documented options the tests exercise
    generate: Callable[[random.Random], TestInput]
    samples: tuple[str, ...]  # shell snippets an agent might run to observe (not hidden tests)
    also_hide: tuple[str, ...] = ()  # other programs that ARE the reference under another name


def _line(rng: random.Random, lo: int = 0, hi: int = 8, sep: str = " ") -> str:
    return sep.join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def _text(rng: random.Random, lo: int = 1, hi: int = 12, *, blanks: float = 0.1) -> str:
    lines = ["" if rng.random() < blanks else _line(rng, 1, 8) for _ in range(rng.randint(lo, hi))]
    text = "\n".join(lines)
    return text if rng.random() < 0.15 else text + "\n"


def _spaced_text(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(1, 10)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(0, 7))]
        seps = [rng.choice([" ", " ", "  ", "\t", "   "]) for _ in words]
        lines.append(
            rng.choice(["", " ", "\t"]) + "".join(w + s for w, s in zip(words, seps, strict=True))
        )
    return "\n".join(lines) + ("\n" if rng.random() < 0.85 else "")


def gen_rev(rng: random.Random) -> TestInput:
    return TestInput((), _text(rng))


def gen_tac(rng: random.Random) -> TestInput:
    if rng.random() < 0.3:
        sep = rng.choice([",", ";", "::"])
        items = [rng.choice(WORDS) for _ in range(rng.randint(1, 8))]
        tail = sep if rng.random() < 0.6 else ""
        return TestInput(("-s", sep), sep.join(items) + tail)
    return TestInput((), _text(rng, 2, 12))


def gen_wc(rng: random.Random) -> TestInput:
    flags = [f for f in ("-l", "-w", "-c", "-L") if rng.random() < 0.4]
    rng.shuffle(flags)
    return TestInput(tuple(flags), _spaced_text(rng))


def gen_nl(rng: random.Random) -> TestInput:
    args: list[str] = []
    if rng.random() < 0.5:
        args += ["-b", rng.choice(["a", "t"])]
    if rng.random() < 0.5:
        args += ["-n", rng.choice(["ln", "rn", "rz"])]
    if rng.random() < 0.5:
        args += ["-w", str(rng.randint(1, 8))]
    if rng.random() < 0.4:
        args += ["-s", rng.choice([":", " ", ". ", "|"])]
    if rng.random() < 0.3:
        args += ["-v", str(rng.randint(0, 20))]
    if rng.random() < 0.3:
        args += ["-i", str(rng.randint(1, 5))]
    return TestInput(tuple(args), _text(rng, 1, 15, blanks=0.25))


def gen_fold(rng: random.Random) -> TestInput:
    args: list[str] = []
    if rng.random() < 0.8:
        args += ["-w", str(rng.randint(4, 40))]
    if rng.random() < 0.5:
        args.append("-s")
    lines = [_line(rng, 0, 20) for _ in range(rng.randint(1, 6))]
    return TestInput(tuple(args), "\n".join(lines) + ("\n" if rng.random() < 0.85 else ""))


def gen_expand(rng: random.Random) -> TestInput:
    args: list[str] = []
    if rng.random() < 0.6:
        args += ["-t", str(rng.randint(1, 10))]
    if rng.random() < 0.3:
        args.append("-i")
    return TestInput(tuple(args), _spaced_text(rng))


def _tr_set(rng: random.Random, n: int) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    out = ""
    while len(out) < n:
        if rng.random() < 0.3:
            i = rng.randrange(len(alphabet) - 4)
            j = min(len(alphabet) - 1, i + rng.randint(1, 5))
            if alphabet[i].isalpha() == alphabet[j].isalpha():
                out += f"{alphabet[i]}-{alphabet[j]}"
                continue
        out += rng.choice(alphabet)
    return out


def gen_tr(rng: random.Random) -> TestInput:
    text = _text(rng, 1, 8)
    mode = rng.choice(["map", "map", "upper", "delete", "squeeze", "map_squeeze", "keep"])
    if mode == "map":
        return TestInput((_tr_set(rng, rng.randint(1, 6)), _tr_set(rng, rng.randint(1, 6))), text)
    if mode == "upper":
        pair = rng.choice([("[:lower:]", "[:upper:]"), ("[:upper:]", "[:lower:]")])
        return TestInput(
            pair, text.upper() if pair[0] == "[:upper:]" and rng.random() < 0.5 else text
        )
    if mode == "delete":
        return TestInput(("-d", _tr_set(rng, rng.randint(1, 5))), text)
    if mode == "squeeze":
        return TestInput(
            ("-s", rng.choice([" ", "a-z", "lo", "[:digit:] "])), text.replace(" ", "  ")
        )
    if mode == "map_squeeze":
        return TestInput(
            ("-s", _tr_set(rng, rng.randint(1, 4)), rng.choice(["x", "-", "ab"])), text
        )
    return TestInput(("-cd", rng.choice(["a-z\n", "[:digit:]\n", "aeiou \n", "a-f"])), text)


def _cut_list(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 3)):
        a = rng.randint(1, 6)
        kind = rng.random()
        if kind < 0.4:
            parts.append(str(a))
        elif kind < 0.7:
            parts.append(f"{a}-{a + rng.randint(0, 4)}")
        elif kind < 0.85:
            parts.append(f"{a}-")
        else:
            parts.append(f"-{a}")
    return ",".join(parts)


def gen_cut(rng: random.Random) -> TestInput:
    if rng.random() < 0.6:
        delim = rng.choice([":", ",", "\t", " "])
        lines = [delim.join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) for _ in range(6)]
        if rng.random() < 0.3:
            lines.append("no delimiter here")
        text = "\n".join(lines) + ("\n" if rng.random() < 0.85 else "")
        args: list[str] = ["-f", _cut_list(rng)]
        if delim != "\t" or rng.random() < 0.5:
            args += ["-d", delim]
        if rng.random() < 0.3:
            args.append("-s")
        return TestInput(tuple(args), text)
    return TestInput((rng.choice(["-c", "-b"]), _cut_list(rng)), _text(rng, 1, 8))


def gen_uniq(rng: random.Random) -> TestInput:
    pool = [rng.choice(WORDS) for _ in range(4)] + ["Foo", "foo", "FOO", ""]
    lines = []
    for _ in range(rng.randint(1, 10)):
        lines += [rng.choice(pool)] * rng.choice([1, 1, 2, 3])
    flags = [f for f in ("-c", "-d", "-u", "-i") if rng.random() < 0.3]
    text = "\n".join(lines) + ("\n" if rng.random() < 0.85 else "")
    return TestInput(tuple(flags), text)


def gen_head(rng: random.Random) -> TestInput:
    text = _text(rng, 1, 20)
    r = rng.random()
    if r < 0.2:
        return TestInput((), text)
    n = rng.randint(0, 15)
    if r < 0.6:
        return TestInput(("-n", str(n if rng.random() < 0.7 else -n)), text)
    return TestInput(("-c", str(n * 3 if rng.random() < 0.7 else -n * 3)), text)


def gen_tail(rng: random.Random) -> TestInput:
    text = _text(rng, 1, 20)
    r = rng.random()
    if r < 0.2:
        return TestInput((), text)
    n = rng.randint(0, 15)
    if r < 0.6:
        return TestInput(("-n", f"+{n}" if rng.random() < 0.3 else str(n)), text)
    return TestInput(("-c", f"+{n * 3}" if rng.random() < 0.3 else str(n * 3)), text)


def _b64(data: bytes, width: int) -> str:
    import base64

    enc = base64.b64encode(data).decode()
    if width == 0:
        return enc
    return "".join(enc[i : i + width] + "\n" for i in range(0, len(enc), width))


def gen_base64(rng: random.Random) -> TestInput:
    text = _text(rng, 1, 6)
    if rng.random() < 0.35:
        width = rng.choice([0, 20, 76])
        return TestInput(("-d",), _b64(text.encode(), width) + ("\n" if width == 0 else ""))
    if rng.random() < 0.5:
        return TestInput(("-w", str(rng.choice([0, 1, 4, 10, 30, 60, 76, 100]))), text)
    return TestInput((), text)


def gen_factor(rng: random.Random) -> TestInput:
    def num() -> str:
        r = rng.random()
        if r < 0.05:
            return rng.choice(["abc", "-5", "1.5"])
        if r < 0.3:
            return str(rng.randint(0, 100))
        if r < 0.7:
            return str(rng.randint(100, 10**6))
        return str(rng.randint(10**6, 10**10))

    nums = [num() for _ in range(rng.randint(1, 5))]
    if rng.random() < 0.5:
        return TestInput(tuple(nums), "")
    return TestInput((), rng.choice([" ", "\n", "  "]).join(nums) + "\n")


def gen_seq(rng: random.Random) -> TestInput:
    args: list[str] = []
    if rng.random() < 0.3:
        args += ["-s", rng.choice([",", " ", ":", "--"])]
    if rng.random() < 0.3:
        args.append("-w")
    first, last = rng.randint(-20, 20), rng.randint(-30, 60)
    shape = rng.random()
    if shape < 0.3:
        args.append(str(rng.randint(0, 40)))
    elif shape < 0.6:
        args += [str(first), str(last)]
    else:
        step = rng.choice([1, 2, 3, 5, -1, -2, -4, 7]) if rng.random() < 0.95 else 0
        args += [str(first), str(step), str(last)]
    return TestInput(tuple(args), "")


def gen_column(rng: random.Random) -> TestInput:
    args: list[str] = ["-t"]
    sep = None
    if rng.random() < 0.4:
        sep = rng.choice([",", ":", ";"])
        args += ["-s", sep]
    if rng.random() < 0.3:
        args += ["-o", rng.choice(["|", " | ", "\t", " "])]
    lines = []
    for _ in range(rng.randint(1, 8)):
        cells = [rng.choice(WORDS) for _ in range(rng.randint(1, 5))]
        if sep is None:
            lines.append(rng.choice(["", " "]) + " ".join(c + rng.choice(["", " "]) for c in cells))
        else:
            lines.append(sep.join(cells))
        if rng.random() < 0.1:
            lines.append("")
    return TestInput(tuple(args), "\n".join(lines) + "\n")


def _echo(s: str) -> str:
    return f"printf '{s}' | ./reference"


TASK_SPECS: dict[str, TaskSpec] = {
    s.task_id: s
    for s in [
        TaskSpec("rev", "rev", "util-linux", 1, (), gen_rev, (_echo("hello\\nworld\\n"),)),
        TaskSpec("tac", "tac", "coreutils", 1, ("-s",), gen_tac, (_echo("a\\nb\\nc\\n"),)),
        TaskSpec("head", "head", "coreutils", 1, ("-n", "-c"), gen_head, (_echo("1\\n2\\n3\\n"),)),
        TaskSpec("tail", "tail", "coreutils", 1, ("-n", "-c"), gen_tail, (_echo("1\\n2\\n3\\n"),)),
        TaskSpec(
            "expand", "expand", "coreutils", 1, ("-t", "-i"), gen_expand, (_echo("a\\tb\\n"),)
        ),
        TaskSpec(
            "base64",
            "base64",
            "coreutils",
            1,
            ("-d", "-w"),
            gen_base64,
            (_echo("hi\\n"),),
            also_hide=("basenc",),  # `basenc --base64` is the same coreutils code
        ),
        TaskSpec("wc", "wc", "coreutils", 2, ("-l", "-w", "-c", "-L"), gen_wc, (_echo("a b\\n"),)),
        TaskSpec(
            "nl",
            "nl",
            "coreutils",
            2,
            ("-b", "-n", "-w", "-s", "-v", "-i"),
            gen_nl,
            (_echo("a\\n\\nb\\n"),),
        ),
        TaskSpec("fold", "fold", "coreutils", 2, ("-w", "-s"), gen_fold, (_echo("abcdefgh\\n"),)),
        TaskSpec(
            "uniq",
            "uniq",
            "coreutils",
            2,
            ("-c", "-d", "-u", "-i"),
            gen_uniq,
            (_echo("a\\na\\nb\\n"),),
        ),
        TaskSpec(
            "cut",
            "cut",
            "coreutils",
            2,
            ("-f", "-d", "-s", "-c", "-b"),
            gen_cut,
            (_echo("a:b:c\\n") + " -d: -f2",),
        ),
        TaskSpec("factor", "factor", "coreutils", 2, (), gen_factor, ("./reference 12 97",)),
        TaskSpec("seq", "seq", "coreutils", 2, ("-s", "-w"), gen_seq, ("./reference 3",)),
        TaskSpec(
            "column",
            "column",
            "bsdextrautils",
            3,
            ("-t", "-s", "-o"),
            gen_column,
            (_echo("a bb\\nccc d\\n") + " -t",),
        ),
        TaskSpec(
            "tr",
            "tr",
            "coreutils",
            3,
            ("-d", "-s", "-c"),
            gen_tr,
            (_echo("hello\\n") + " a-z A-Z",),
        ),
    ]
}

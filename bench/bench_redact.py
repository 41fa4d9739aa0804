"""What redacting keys costs per answer: `Redactor.text` on a long answer, the step every
string an endpoint sends back passes through (`mbb.llm.redact`).

Three texts of `--kb` kB (a negotiator's answer with its reasoning, repeated): one holding no
key material (the usual case: one set test settles it), one holding `--echoes` partial echoes
of the key (runs of 10–30 of its characters, the case the fragment rule is for), and one
holding the whole key that many times. Reported per text: milliseconds per call, min–max over
`--reps` repetitions of `--calls` calls each.

Usage: python bench/bench_redact.py [--kb 58] [--echoes 5] [--reps 5] [--calls 20]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mbb.llm.redact import Redactor  # noqa: E402

KEY = "sk-proj-" + "".join(
    random.Random(7).choices("abcdefghijkmnopqrstuvwxyzABCDEFGH0123456789", k=48)
)
ANSWER = (
    "I need about 40 seconds of the resource this round; my deadline is close and my budget "
    "still holds 310 credits, so I bid 55 and propose that W2 takes the next window. "
    '{"bid": 55, "message": {"to": "W2", "text": "you first next round if I go now?"}} '
)


def texts(kb: int, echoes: int) -> dict[str, str]:
    rng = random.Random(1)
    base = (ANSWER * (kb * 1024 // len(ANSWER) + 1))[: kb * 1024]

    def planted(parts: list[str]) -> str:
        cut = sorted(rng.sample(range(len(base)), len(parts)))
        out, pos = [], 0
        for at, part in zip(cut, parts, strict=True):
            out += [base[pos:at], part]
            pos = at
        return "".join([*out, base[pos:]])

    fragments = []
    for _ in range(echoes):
        n = rng.randint(10, 30)
        a = rng.randint(0, len(KEY) - n)
        fragments.append(KEY[a : a + n])
    return {
        "no key material": base,
        f"{echoes} partial echoes": planted(fragments),
        f"{echoes} whole keys": planted([KEY] * echoes),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", type=int, default=58)
    ap.add_argument("--echoes", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    args = ap.parse_args()
    red = Redactor([KEY])
    for name, text in texts(args.kb, args.echoes).items():
        out = red.text(text) or ""
        assert not any(KEY[i : i + 10] in out for i in range(len(KEY) - 9)), name
        per_call = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            for _ in range(args.calls):
                red.text(text)
            per_call.append((time.perf_counter() - t0) / args.calls * 1000)
        print(f"{name:>22}: {min(per_call):.2f}–{max(per_call):.2f} ms per {args.kb} kB text")


if __name__ == "__main__":
    main()

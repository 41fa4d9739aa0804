"""Build the real-task suite: reference copies, docs and screened hidden tests, cached on disk.

A task is a small Debian CLI tool nobody here wrote. `build_suite` copies the tool (the agent
will only ever see an execute-only copy), captures its `--help` (and man page when installed),
and records hidden tests by running the tool on seeded inputs inside the sandbox, twice. Tests
whose two runs differ (flaky) or that a stub passes (empty stdout, exit 0) are dropped. The
build is idempotent: a task whose fingerprint (binary hash, spec version, seed, size) matches
its cache entry is loaded, not rebuilt. The cache holds the hidden tests, so it lives outside
the repository (`~/.cache/mbb/tasks`, or `$MBB_TASK_CACHE`) and carries its own `.gitignore`.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mbb.resource.sandbox import SandboxLimits, run_sandboxed
from mbb.tasks.specs import TASK_SPECS, TaskSpec, TestInput

__all__ = [
    "MIN_TESTS",
    "REQUIRED_DEBIAN_PACKAGES",
    "SPEC_VERSION",
    "BuiltTask",
    "HiddenTest",
    "Suite",
    "SuiteBuildError",
    "build_suite",
    "default_cache_dir",
]

# bubblewrap: the sandbox; util-linux: prlimit, setpriv and `rev`; python3: the recording driver
# and the oracle reconstructions (/usr/bin/python3 inside the sandbox); the rest: the references.
REQUIRED_DEBIAN_PACKAGES: tuple[str, ...] = (
    "bubblewrap",
    "coreutils",
    "util-linux",
    "bsdextrautils",
    "python3",
)
SPEC_VERSION = 3  # bump when generators or screening change: every cached task is rebuilt
MIN_TESTS = 30
_DOCS_MAX = 20_000
_DRIVER = r"""
import base64, json, subprocess, sys
req = json.load(sys.stdin)
out = []
for rep in range(2):
    row = []
    for t in req["tests"]:
        try:
            p = subprocess.run([req["program"], *t["args"]], input=t["stdin"].encode("latin-1"),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=5)
            row.append([base64.b64encode(p.stdout).decode(), p.returncode])
        except subprocess.TimeoutExpired:
            row.append([None, None])
    out.append(row)
json.dump(out, sys.stdout)
"""


class SuiteBuildError(RuntimeError):
    """The suite cannot be built (a reference program is missing, too few tests survive...)."""


@dataclass(frozen=True, slots=True)
class HiddenTest:
    """One recorded behaviour of the reference; strings hold bytes as latin-1 (lossless)."""

    test_id: str
    args: tuple[str, ...]
    stdin: str
    stdout: str
    exit_code: int


@dataclass(frozen=True, slots=True)
class BuiltTask:
    task_id: str
    program: str
    package: str
    original: str  # the reference's path on the host: hidden from the worker doing this task
    also_hidden: tuple[str, ...]  # host paths of the same program under other names (hidden too)
    reference: Path  # execute-only copy in the cache, bind-mounted as ./reference
    docs: str
    difficulty: int
    interface_size: int  # distinct options exercised by the hidden tests
    n_tests: int
    dropped: dict[str, int]  # screening: flaky, stub, timeout, duplicate
    samples: tuple[str, ...]
    tests_path: Path

    def hidden_tests(self) -> list[HiddenTest]:
        rows = json.loads(self.tests_path.read_text())
        return [
            HiddenTest(r["test_id"], tuple(r["args"]), r["stdin"], r["stdout"], r["exit_code"])
            for r in rows
        ]


@dataclass(frozen=True, slots=True)
class Suite:
    cache_dir: Path
    tasks: dict[str, BuiltTask]
    build_s: float  # wall seconds this call took (≈0 when everything was cached)
    rebuilt: tuple[str, ...]  # tasks (re)built by this call

    def __getitem__(self, task_id: str) -> BuiltTask:
        return self.tasks[task_id]

    @property
    def task_ids(self) -> list[str]:
        return list(self.tasks)


def default_cache_dir() -> Path:
    env = os.environ.get("MBB_TASK_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "mbb" / "tasks"


def _find_program(name: str) -> Path | None:
    for d in ("/usr/bin", "/bin", "/usr/sbin"):
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def _find_original(spec: TaskSpec) -> Path:
    found = _find_program(spec.program)
    if found is not None:
        return found
    raise SuiteBuildError(
        f"task {spec.task_id!r}: reference program {spec.program!r} (Debian package "
        f"{spec.package}) is not installed; install the suite's packages with: "
        f"apt-get install -y {' '.join(REQUIRED_DEBIAN_PACKAGES)}"
    )


def _docs(program: Path) -> str:
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "LANG": "C", "MANWIDTH": "80", "TERM": "dumb"}
    parts = []
    try:
        h = subprocess.run([str(program), "--help"], capture_output=True, env=env, timeout=10)
        parts.append((h.stdout or h.stderr).decode("utf-8", "replace"))
    except (OSError, subprocess.TimeoutExpired):
        pass
    if shutil.which("man"):
        try:
            m = subprocess.run(
                ["man", "-P", "cat", program.name], capture_output=True, env=env, timeout=20
            )
            if m.returncode == 0 and m.stdout.strip():
                parts.append("MANUAL PAGE\n" + m.stdout.decode("utf-8", "replace"))
        except (OSError, subprocess.TimeoutExpired):
            pass
    name = program.name
    text = "\n\n".join(parts).replace(str(program), name)[:_DOCS_MAX]
    return f"Documentation of the program to reconstruct ({name}; run it as ./reference)\n\n{text}"


def _candidates(spec: TaskSpec, seed: int, n: int) -> tuple[list[TestInput], int]:
    rng = random.Random(f"{seed}:{spec.task_id}")
    seen: set[TestInput] = set()
    out: list[TestInput] = []
    dup = 0
    for _ in range(n * 20):
        if len(out) >= n:
            break
        t = spec.generate(rng)
        if t in seen:
            dup += 1
            continue
        seen.add(t)
        out.append(t)
    return out, dup


def _record(program: Path, tests: list[TestInput]) -> list[list[list[Any]]]:
    req = {"program": str(program), "tests": [{"args": t.args, "stdin": t.stdin} for t in tests]}
    limits = SandboxLimits(output_bytes=64 << 20, wall_s=300)
    res = run_sandboxed(
        ["/usr/bin/python3", "-c", _DRIVER], stdin=json.dumps(req).encode(), limits=limits
    )
    if res.exit_code != 0:
        raise SuiteBuildError(
            f"recording tests of {program} failed (exit {res.exit_code}): "
            f"{res.stderr.decode('utf-8', 'replace')[-2000:]}"
        )
    return json.loads(res.stdout)


def _fingerprint(spec: TaskSpec, original: Path, seed: int, n_tests: int) -> str:
    h = hashlib.sha256(original.read_bytes())
    h.update(f"{SPEC_VERSION}:{seed}:{n_tests}:{spec.task_id}:{spec.options}".encode())
    return h.hexdigest()


def _build_task(spec: TaskSpec, root: Path, seed: int, n_tests: int) -> bool:
    """Build one task into `root/<task_id>`; returns False when the cache was already valid."""
    original = _find_original(spec)
    fp = _fingerprint(spec, original, seed, n_tests)
    d = root / spec.task_id
    meta_path = d / "meta.json"
    if meta_path.exists():
        try:
            if json.loads(meta_path.read_text()).get("fingerprint") == fp:
                return False
        except json.JSONDecodeError:
            pass
    tmp = root / f".{spec.task_id}.building"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    ref = tmp / "reference"
    shutil.copyfile(original, ref)
    os.chmod(ref, 0o111)
    (tmp / "docs.txt").write_text(_docs(original))
    cands, dup = _candidates(spec, seed, n_tests * 2)
    runs = _record(original, cands)
    kept: list[dict[str, Any]] = []
    dropped = {"flaky": 0, "stub": 0, "timeout": 0, "duplicate": dup, "surplus": 0}
    options: set[str] = set()
    for t, a, b in zip(cands, runs[0], runs[1], strict=True):
        if a[0] is None or b[0] is None:
            dropped["timeout"] += 1
        elif a != b:
            dropped["flaky"] += 1
        elif a[0] == "" and a[1] == 0:
            dropped["stub"] += 1
        elif len(kept) >= n_tests:
            dropped["surplus"] += 1
        else:
            import base64

            stdout = base64.b64decode(a[0]).decode("latin-1")
            kept.append(
                {
                    "test_id": f"t{len(kept):03d}",
                    "args": list(t.args),
                    "stdin": t.stdin,
                    "stdout": stdout,
                    "exit_code": a[1],
                }
            )
            options.update(x for x in t.args if x in spec.options or x[:2] in spec.options)
    if len(kept) < MIN_TESTS:
        raise SuiteBuildError(
            f"task {spec.task_id!r}: only {len(kept)} tests survived screening (need {MIN_TESTS}); "
            f"dropped {dropped}"
        )
    (tmp / "tests.json").write_text(json.dumps(kept, indent=0))
    meta = {
        "task_id": spec.task_id,
        "program": spec.program,
        "package": spec.package,
        "original": str(original),
        "also_hidden": [str(x) for x in map(_find_program, spec.also_hide) if x],
        "difficulty": spec.difficulty,
        "interface_size": len({o[:2] for o in options}),
        "n_tests": len(kept),
        "dropped": dropped,
        "samples": list(spec.samples),
        "fingerprint": fp,
        "seed": seed,
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    shutil.rmtree(d, ignore_errors=True)
    tmp.rename(d)
    return True


def _load_task(root: Path, task_id: str) -> BuiltTask:
    d = root / task_id
    m = json.loads((d / "meta.json").read_text())
    return BuiltTask(
        task_id=task_id,
        program=m["program"],
        package=m["package"],
        original=m["original"],
        also_hidden=tuple(m["also_hidden"]),
        reference=d / "reference",
        docs=(d / "docs.txt").read_text(),
        difficulty=m["difficulty"],
        interface_size=m["interface_size"],
        n_tests=m["n_tests"],
        dropped=m["dropped"],
        samples=tuple(m["samples"]),
        tests_path=d / "tests.json",
    )


def build_suite(
    cache_dir: str | Path | None = None,
    *,
    tasks: list[str] | None = None,
    seed: int = 0,
    n_tests: int = 40,
) -> Suite:
    """Build (or load from cache) every task; raises SuiteBuildError naming the apt-get command."""
    t0 = time.monotonic()
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)  # hidden tests: only the operator (root) may look in
    (root / ".gitignore").write_text("*\n")
    ids = tasks or list(TASK_SPECS)
    unknown = sorted(set(ids) - set(TASK_SPECS))
    if unknown:
        raise SuiteBuildError(f"unknown task(s) {unknown}; known: {sorted(TASK_SPECS)}")
    missing = [] if Path("/usr/bin/python3").exists() else ["/usr/bin/python3 (python3)"]
    for tid in ids:
        try:
            _find_original(TASK_SPECS[tid])
        except SuiteBuildError:
            missing.append(f"{TASK_SPECS[tid].program} ({TASK_SPECS[tid].package})")
    if missing:
        raise SuiteBuildError(
            f"reference programs missing: {', '.join(missing)}; install them with: "
            f"apt-get install -y {' '.join(REQUIRED_DEBIAN_PACKAGES)}"
        )
    rebuilt = tuple(tid for tid in ids if _build_task(TASK_SPECS[tid], root, seed, n_tests))
    built = {tid: _load_task(root, tid) for tid in ids}
    return Suite(root, built, time.monotonic() - t0, rebuilt)


def describe(task: BuiltTask) -> dict[str, object]:
    """A task's public row for tables (no hidden test content)."""
    d = asdict(task)
    for k in ("docs", "reference", "tests_path", "samples"):
        d.pop(k)
    return d

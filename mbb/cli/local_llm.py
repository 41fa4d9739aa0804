"""`mbb local-llm`: a real model offline. Start a llama.cpp OpenAI-compatible server with
SmolLM2-135M-Instruct and run a condition against it, or check / install the pieces
(`mbb.llm.local` says why mbb builds llama-cpp-python itself).

    make local-llm                     # installs the optional pieces, then runs the below
    mbb local-llm params/local_llm.yaml --port 8080
    mbb local-llm --study local_smoke  # serve it and run a study against it (studies/)
    mbb local-llm --check              # exit 0 iff installed, portable, answering
    mbb local-llm --install            # build (once per CPU feature set) and install both pieces
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mbb.cli import common, run, study

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    from mbb.llm.local import DEFAULT_SLOTS

    ap = sub.add_parser(
        "local-llm",
        help="the local model: --check, --install, or serve it and run a condition against it",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "params",
        nargs="?",
        default="params/local_llm.yaml",
        help="the condition to run against the local model",
    )
    ap.add_argument(
        "--study",
        default=None,
        help="a study file to run while the server runs (e.g. local_smoke; its models' "
        "base_url must be http://127.0.0.1:PORT/v1)",
    )
    ap.add_argument("--port", type=int, default=8080, help="loopback port of the server")
    ap.add_argument("--out", default="outputs/local_llm", help="output folder of the run")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (all cores - 1)")
    ap.add_argument(
        "--slots",
        type=int,
        default=DEFAULT_SLOTS,
        help="server processes, one context per worker (for idle cores; default 1)",
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help="check the installation and that the server answers one completion (exit 1 if not)",
    )
    ap.add_argument(
        "--install",
        action="store_true",
        help="build (portably, once per CPU feature set) and install the pieces",
    )
    ap.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from mbb.llm.local import answers_one_completion, install, llama_server, missing

    if args.install:
        install()
    if args.check or args.install:
        problems = missing()
        if not problems and (why := answers_one_completion()):
            problems = [f"the installed server does not answer: {why}"]
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    if args.slots < 1:
        raise common.CliError(f"--slots must be at least 1, got {args.slots}")
    parser = common.Parser(prog="mbb")
    subparsers = parser.add_subparsers(dest="command")
    run.add_parser(subparsers)
    study.add_parser(subparsers)
    if args.study is not None:
        from mbb.batch.study import StudyError, load_study

        try:
            loaded = load_study(args.study)
        except StudyError as exc:
            raise common.CliError(str(exc)) from None
        want = f"http://127.0.0.1:{args.port}/v1"
        elsewhere = sorted(s for s, c in loaded.configs.items() if c.base_url != want)
        if elsewhere:
            raise common.CliError(
                f"{loaded.source}: models {elsewhere} are not at {want}, where the local "
                "server answers (set their base_url, or --port)"
            )
    with llama_server(args.port, threads=args.threads, slots=args.slots) as url:
        print(f"llama.cpp server with SmolLM2 at {url}")
        if args.study is not None:
            study_args = parser.parse_args(["study", args.study])
            return int(study_args.func(study_args))
        # `mbb run PARAMS --out OUT --set models.local.base_url=URL`, errors handled by `mbb`'s
        given = ["run", args.params, "--out", args.out, "--set", f"models.local.base_url={url}"]
        run_args = parser.parse_args(given)
        return int(run_args.func(run_args))

"""`mbb tasks build` / `mbb tasks check` hooks."""

from __future__ import annotations

import argparse

from mbb.cli import main as mbb_main
from mbb.cli import tasks as cli


def test_add_parser_registers_build_and_check():
    p = argparse.ArgumentParser(prog="mbb")
    cli.add_parser(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["tasks", "check", "--cache", "/x", "--tasks", "rev"])
    assert args.func is cli._cmd_check and args.cache == "/x" and args.tasks == ["rev"]
    args = p.parse_args(["tasks", "build"])
    assert args.func is cli._cmd_build


def test_build_and_check_print_tables(suite, capsys):
    cache = str(suite.cache_dir)
    assert mbb_main(["tasks", "build", "--cache", cache, "--tasks", "rev", "wc"]) == 0
    out = capsys.readouterr().out
    assert "rev" in out and "wc" in out and "tasks in" in out
    assert mbb_main(["tasks", "check", "--cache", cache, "--tasks", "rev", "wc"]) == 0
    out = capsys.readouterr().out
    assert "2/2 tasks sound" in out


def test_check_fails_without_oracle(suite, tmp_path, capsys):
    rc = mbb_main(
        [
            "tasks",
            "check",
            "--cache",
            str(suite.cache_dir),
            "--tasks",
            "rev",
            "--oracle-dir",
            str(tmp_path),
        ]
    )
    assert rc == 1 and "failing: ['rev']" in capsys.readouterr().out

"""The `hermes` command line: parse arguments, load config, start things.

Every sub-command lives in `cli/`; this module only builds the parser and dispatches. It is the one
place that reads environment variables (HERMES_HOME, API keys), so nothing below it has hidden knobs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

__version__ = "0.1.0"


def hermes_home(environ: dict[str, str] | None = None) -> Path:
    """HERMES_HOME, default ~/.hermes."""
    env = os.environ if environ is None else environ
    return Path(env.get("HERMES_HOME") or Path.home() / ".hermes").expanduser()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hermes",
        description="Hermes: an async agent runtime for the terminal, Telegram, Discord and HTTP.",
    )
    parser.add_argument("--version", action="version", version=f"hermes {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    cfg = sub.add_parser("config", help="show, read or change config.yaml")
    cfg_sub = cfg.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    cfg_sub.add_parser("show", help="print the effective configuration")
    get = cfg_sub.add_parser("get", help="print one key, e.g. compression.threshold")
    get.add_argument("key")
    set_ = cfg_sub.add_parser("set", help="validate and write one key, keeping comments")
    set_.add_argument("key")
    set_.add_argument("value")
    cfg_sub.add_parser("path", help="print the path of config.yaml")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    home = hermes_home()
    if args.command == "config":
        from cli.config_cmd import run_config_command

        return run_config_command(args, home)
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())

"""The `hermes` command line: parse arguments, load config, start things.

Every sub-command lives in `cli/`; this module only builds the parser and dispatches. It is the one
place that reads environment variables (HERMES_HOME, API keys), so nothing below it has hidden knobs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING


def _import_structlog_without_rich() -> None:
    """Import structlog before anything else does, with rich hidden from it.

    structlog imports rich's console, traceback and pretty-printer (and pygments) as it loads,
    whenever rich is installed, only to offer pretty exceptions and locals: ~4 MiB and ~0.1 s
    of every command (issue 31). Ours never use them: `agent.logging_setup` formats exceptions
    as plain text (`format_exc_info`) before any renderer sees them. Commands that draw with
    rich (the terminal chat) import it themselves, later. A process where either is already
    loaded (an embedding program, a test run) is left as it is.
    """
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]


_import_structlog_without_rich()

from agent.errors import ConfigError  # noqa: E402

if TYPE_CHECKING:
    from agent.config import HermesConfig

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

    cfg = sub.add_parser(
        "config",
        help="show, read or change config.yaml",
        description="Read and edit HERMES_HOME/config.yaml (config.example.yaml documents "
        "every key with its default).",
    )
    cfg_sub = cfg.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    cfg_sub.add_parser("show", help="print the effective configuration (secrets masked)")
    get = cfg_sub.add_parser("get", help="print one key, e.g. compression.threshold")
    get.add_argument("key", help="a dotted key, e.g. model.default")
    set_ = cfg_sub.add_parser(
        "set", help="validate and write one key; every other line stays as it is"
    )
    set_.add_argument("key", help="a dotted key, e.g. compression.threshold")
    set_.add_argument("value", help="a YAML value: 0.6, true, claude-haiku-4-5, '[\"123\"]'")
    cfg_sub.add_parser("path", help="print the path of config.yaml")

    from cli.chat_sessions import PICK

    chat = sub.add_parser(
        "chat",
        help="talk to the agent: the terminal chat, or one message with -q",
        description="The terminal chat (a new session unless -c or --resume), or one message "
        "with -q. In the chat: Enter sends, Alt-Enter adds a line, Esc or Ctrl-C stops a reply, "
        "/help lists the commands.",
    )
    chat.add_argument(
        "-q",
        "--query",
        metavar="TEXT",
        help="send one message, print the reply and exit; '-' reads it from stdin "
        "(default: the interactive chat)",
    )
    chat.add_argument(
        "--resume",
        nargs="?",
        const=PICK,
        metavar="SESSION_ID",
        help="continue an earlier session; without an id, pick one from a list "
        "(default: a new session)",
    )
    chat.add_argument(
        "-c",
        "--continue",
        dest="continue_",
        action="store_true",
        help="continue the newest terminal session (default: a new session)",
    )
    chat.add_argument(
        "--model", metavar="NAME", help="use this model (default: model.default in config.yaml)"
    )
    chat.add_argument(
        "--json",
        action="store_true",
        help="with -q: print one JSON object with reply, session_id, model and usage "
        "(default: stream the reply as text)",
    )

    from cli.sessions_cmd import add_sessions_parser

    add_sessions_parser(sub)
    from cli.memory_cmd import add_memory_parser

    add_memory_parser(sub)
    from cli.demo_cmd import add_demo_parser

    add_demo_parser(sub)
    from cli.logs_cmd import add_logs_parser

    add_logs_parser(sub)
    from cli.mcp_cmd import add_mcp_parser

    add_mcp_parser(sub)
    from cli.cron_cmd import add_cron_parser

    add_cron_parser(sub)

    sub.add_parser(
        "setup",
        help="choose a provider, check the key and endpoint, write config.yaml",
        description="Interactive: pick Anthropic, OpenAI, OpenRouter or a server on this "
        "machine; setup checks the endpoint and key, detects the model and its window, and "
        "writes only those keys to config.yaml.",
    )
    doctor = sub.add_parser(
        "doctor",
        help="check config, key, endpoint, model, window, store and gateway tokens",
        description="One line per check, with the fix for each that fails; exit 1 if any did.",
    )
    doctor.add_argument(
        "--deep",
        action="store_true",
        help="read every page of the session database (PRAGMA integrity_check; takes longer "
        "on a large file) instead of the quick check",
    )

    gw = sub.add_parser(
        "gateway",
        help="run the chat gateways (Telegram, Discord, HTTP API)",
        description="The chat gateways; enable each under gateway.* in config.yaml.",
    )
    gw_sub = gw.add_subparsers(dest="gateway_command", metavar="ACTION", required=True)
    gw_sub.add_parser(
        "run", help="start every enabled platform, print where each listens; SIGTERM stops cleanly"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The `hermes` command. Whatever a command does not handle ends as one sentence and an
    exit code (`cli.error_boundary`); a reader that closes the pipe (`| head`) ends it quietly."""
    from cli.error_boundary import run_guarded
    from cli.output import quiet_on_broken_pipe

    return run_guarded(lambda: quiet_on_broken_pipe(lambda: _main(argv)))


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    home = hermes_home()
    if args.command == "config":
        from cli.config_cmd import run_config_command

        return run_config_command(args, home)
    if args.command == "logs":  # works even when config.yaml is broken
        from cli.logs_cmd import run_logs_command

        return run_logs_command(args, home)
    if args.command in ("setup", "doctor"):  # they work on a missing or broken config too
        return _onboarding(args.command, home, deep=getattr(args, "deep", False))
    config = _load(home)  # errors end at the boundary in `main`: one sentence, no traceback
    return _dispatch(args, config, home, dict(os.environ))


def _dispatch(
    args: argparse.Namespace, config: HermesConfig, home: Path, environ: dict[str, str]
) -> int:
    match args.command:
        case "chat" if args.query is not None:
            from cli.chat_cmd import run_chat_once

            return asyncio.run(run_chat_once(args, config, home, environ))
        case "chat":
            from cli.gateway_cmd import run_terminal_chat

            return asyncio.run(
                run_terminal_chat(
                    config,
                    home,
                    environ,
                    model=args.model,
                    resume=args.resume,
                    newest=args.continue_,
                )
            )
        case "sessions" if args.sessions_command == "backup":
            from cli.sessions_cmd import run_backup
            from state import default_url

            return run_backup(config.state.url or default_url(home), home, args.to)
        case "sessions" if args.sessions_command == "compress":
            from cli.compress_cmd import run_compress

            return asyncio.run(run_compress(args, config, home, environ))
        case "sessions":
            from cli.sessions_cmd import run_sessions_cli
            from state import default_url

            url = config.state.url or default_url(home)
            return asyncio.run(run_sessions_cli(args, url, prices=config.pricing))
        case "cron":
            from cli.cron_cmd import run_cron_cli
            from state import default_url

            return asyncio.run(run_cron_cli(args, config, config.state.url or default_url(home)))
        case "memory":
            from cli.memory_cmd import run_memory_cli
            from state import default_url

            url = config.state.url or default_url(home)
            return asyncio.run(run_memory_cli(args, url, config.memory))
        case "demo":
            from sim.demo import run_demo

            return asyncio.run(run_demo(args, config, home, environ))
        case "mcp":
            from cli.mcp_cmd import run_mcp_command

            return asyncio.run(run_mcp_command(args, config, home, environ))
        case "gateway":
            from cli.gateway_cmd import run_gateway

            return asyncio.run(run_gateway(config, home, environ))
        case unknown:  # argparse only passes the commands it was built with
            raise ConfigError(f"unknown command {unknown!r}")


def _onboarding(command: str, home: Path, *, deep: bool = False) -> int:
    """`hermes setup` and `hermes doctor`: logging to HERMES_HOME only, keys from here."""
    from agent.logging_setup import configure_logging

    configure_logging(log_dir=home / "logs", level="info", console=False)
    environ = dict(os.environ)
    if command == "setup":
        from cli.setup_cmd import run_setup

        return asyncio.run(run_setup(home, environ))
    from cli.doctor_cmd import run_doctor

    return asyncio.run(run_doctor(home, environ, deep=deep))


def _load(home: Path) -> HermesConfig:
    """Load config.yaml and set up logging (console quiet, JSON lines in HERMES_HOME/logs)."""
    from agent.config import load_config
    from agent.logging_setup import configure_logging
    from agent.redaction import register_secret

    config = load_config(home / "config.yaml")
    logging = config.logging
    configure_logging(
        log_dir=home / "logs",
        level=logging.level,
        console=False,
        loggers=logging.loggers,
        max_bytes=logging.max_bytes,
        backups=logging.backups,
    )
    for secret in _secrets(config):
        register_secret(secret)
    return config


def _secrets(config: HermesConfig) -> list[str]:
    from agent.redaction import is_secret_name, url_passwords

    values = [
        config.model.api_key,
        config.auxiliary.compression.api_key,
        config.gateway.telegram.token,
        config.gateway.discord.token,
        config.gateway.http.api_key,
    ]
    for key in config.gateway.http.keys:  # named HTTP keys, inline or from the environment
        values += [key.key, os.environ.get(key.key_env) if key.key_env else None]
    for route in config.gateway.http.models.values():
        values.append(os.environ.get(route.api_key_env) if route.api_key_env else None)
    values += [os.environ.get(k) for k in _KEY_VARIABLES]
    for server in config.mcp.servers.values():  # an MCP server's key could come back in a result
        pairs = (*server.env.items(), *server.headers.items())
        values += [v for k, v in pairs if is_secret_name(k.replace("-", "_"))]
        values.append(server.headers.get("Authorization", "").removeprefix("Bearer ").strip())
    # Any variable named like a secret: a command could read it from /proc/<our pid>/environ.
    values += [v for k, v in os.environ.items() if is_secret_name(k)]
    # Passwords inside URLs (DATABASE_URL, state.url), whatever the variable is called.
    values += [p for v in [*os.environ.values(), config.state.url or ""] for p in url_passwords(v)]
    return [v for v in values if v]


_KEY_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "TELEGRAM_BOT_TOKEN",
    "DISCORD_BOT_TOKEN",
    "HERMES_API_KEY",
)


if __name__ == "__main__":
    sys.exit(main())

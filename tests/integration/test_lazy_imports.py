"""What `hermes` imports: a command loads what it uses, not what another command needs (issue 31).

Each check runs the real entry point in a fresh interpreter (a module imported by an earlier test
would hide a regression here) and reads `sys.modules` as the process ends. The one-shot runs
`hermes chat -q` for real against the fake model on loopback, so lazy imports that only happen
on the request path are covered too. Not timed: the start-up figures are
`scripts/bench_startup.py`'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sim.llm_server import FakeLLM
from tests.waits import SLOW_WAIT_S

ROOT = Path(__file__).resolve().parents[2]

NOT_FOR_THE_PARSER = (
    "sim",  # `hermes demo`'s simulator and its aiohttp model server
    "aiohttp.web",
    "prompt_toolkit",  # the interactive chat
    "rich.markdown",
    "rich",  # structlog loads without it (run_agent.py); nothing of the parser draws
    "pygments",
    "openai",
    "anthropic",
    "discord",
    "telegram",
    "mcp",
)
NOT_FOR_THE_ONE_SHOT = (
    "sim",
    "aiohttp.web",
    "prompt_toolkit",
    "gateway.platforms.terminal",
    "rich.markdown",  # the one-shot prints plain text
    "rich.live",
    "rich",  # nor do its logs: exceptions are formatted as plain text (agent.logging_setup)
    "rich.traceback",
    "pygments",
    "markdown_it",
    "anthropic",  # the route is OpenAI-compatible
    "discord",
    "telegram",
    "mcp",  # no MCP server configured
    "tree_sitter",  # no shell command ran
    "sqlalchemy.dialects.postgresql",  # the store is SQLite
    "asyncpg",
    "agent.codex.app_server",
    "gateway.http",
    "prometheus_client",
)

_LOADED = (
    "import atexit, json, runpy, sys\n"
    "wanted = json.loads(sys.argv[1])\n"
    "atexit.register(lambda: print('LOADED ' + json.dumps([m for m in wanted if m in sys.modules]),"
    " file=sys.stderr))\n"
    "sys.argv = ['hermes', *sys.argv[2:]]\n"
    "runpy.run_path('run_agent.py', run_name='__main__')\n"
)


def loaded_by(argv: list[str], wanted: tuple[str, ...], env: dict[str, str]) -> list[str]:
    """Which of `wanted` are in sys.modules when `hermes argv` ends (it must succeed)."""
    proc = subprocess.run(
        [sys.executable, "-c", _LOADED, json.dumps(wanted), *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SLOW_WAIT_S,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(x for x in proc.stderr.splitlines() if x.startswith("LOADED "))
    return list(json.loads(line.removeprefix("LOADED ")))


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    return {**env, "HERMES_HOME": str(home), "PYTHONPATH": str(ROOT)}


def test_building_the_parser_loads_no_command_s_libraries(hermes_home: Path) -> None:
    """`hermes --help` builds the whole parser (every command's arguments) and imports none of
    the simulator, the terminal UI, a provider SDK or a chat platform's library."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, run_agent; run_agent.build_parser(); "
            f"print(json.dumps([m for m in {NOT_FOR_THE_PARSER!r} if m in sys.modules]))",
        ],
        cwd=ROOT,
        env=_env(hermes_home),
        capture_output=True,
        text=True,
        timeout=SLOW_WAIT_S,
        check=True,
    )
    assert json.loads(proc.stdout) == []
    assert loaded_by(["--help"], NOT_FOR_THE_PARSER, _env(hermes_home)) == []


def test_the_one_shot_loads_only_what_it_uses(threaded_llm: FakeLLM, hermes_home: Path) -> None:
    """`hermes chat -q` on an OpenAI-compatible route with a SQLite store: a reply, and none of
    the interactive chat's, the demo's, the other routes' or the other platforms' modules."""
    (hermes_home / "config.yaml").write_text(
        f"model:\n  provider: custom\n  default: llama3.1-8b\n"
        f"  base_url: {threaded_llm.openai_base_url}\n  api_key: test-key\n"
        "  context_length: 128000\n"
    )
    loaded = loaded_by(["chat", "-q", "hello"], NOT_FOR_THE_ONE_SHOT, _env(hermes_home))
    assert loaded == []
    assert threaded_llm.requests, "the one-shot never reached the model"

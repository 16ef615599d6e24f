"""`hermes doctor`: is everything in place? One line per check, with the fix when it is not.

Checks, in order (a failed one skips those that need it): config.yaml is valid; the model's key
is there; the endpoint answers and takes the key; it knows the model; the window is resolved,
and from where; the store opens (migrated) and is writable; the terminal sandbox (bubblewrap)
works; enabled gateways have their tokens; settings that have no effect. Exit 0 when nothing failed (warnings allowed), 1 otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias

from agent.config import HermesConfig, load_config
from agent.errors import ConfigError, HermesError, MissingApiKey
from cli.endpoint_probe import probe_endpoint, probe_sentence

__all__ = [
    "WINDOW_SOURCES",
    "Check",
    "CheckStatus",
    "collect_checks",
    "render_check",
    "run_doctor",
    "sandbox_check",
]

CheckStatus: TypeAlias = Literal["ok", "warn", "fail", "skip"]
_MARK: dict[CheckStatus, str] = {"ok": "✓", "warn": "!", "fail": "✗", "skip": "·"}
WINDOW_SOURCES = {
    "config": "model.context_length in config.yaml",
    "learned": "learned from the provider's overflow error",
    "endpoint": "reported by the endpoint",
    "table": "the table of known models",
    "default": "nothing said; the 128K default",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """One line of the report."""

    name: str
    status: CheckStatus
    says: str
    fix: str = ""


RECOVERY_HINT = (
    "stop hermes, keep a copy of the file, recover it into a new one "
    "(sqlite3 state.db .recover | sqlite3 recovered.db) and put recovered.db in its place"
)


def render_check(check: Check) -> str:
    """`✓ endpoint  http://… answers…` / `✗ key  … → fix: …`."""
    fix = f" → fix: {check.fix}" if check.fix and check.status in ("fail", "warn") else ""
    return f"{_MARK[check.status]} {check.name:<9} {check.says}{fix}"


async def run_doctor(home: Path, environ: Mapping[str, str], *, deep: bool = False) -> int:
    """Print one line per check; 1 when any failed. `deep` reads every page of the session
    database (`PRAGMA integrity_check`) instead of the quick check."""
    checks = await collect_checks(home, environ, deep=deep)
    for check in checks:
        print(render_check(check))
    failed = sum(1 for c in checks if c.status == "fail")
    print(f"{failed} problem{'s' if failed != 1 else ''} found." if failed else "All good.")
    return 1 if failed else 0


async def collect_checks(
    home: Path, environ: Mapping[str, str], *, deep: bool = False
) -> list[Check]:
    path = home / "config.yaml"
    try:
        config = load_config(path)
    except ConfigError as exc:
        return [
            Check(
                name="config", status="fail", says=str(exc), fix="correct it, or run `hermes setup`"
            ),
            Check(name="others", status="skip", says="skipped until config.yaml is valid"),
        ]
    shown = str(path) if path.exists() else f"{path} (not there: all defaults)"
    checks = [Check(name="config", status="ok", says=f"{shown} is valid")]
    checks += await _model_checks(config, environ, home)
    checks.append(await _store_check(config, home, deep=deep))
    from agent.tools.sandbox import bwrap_problem

    checks.append(sandbox_check(config, bwrap_problem()))
    checks += _gateway_checks(config, environ)
    from cli.config_cmd import config_warnings

    checks += [
        Check(name="setting", status="warn", says=w, fix="raise it, or leave it for 512K models")
        for w in config_warnings(config)
    ]
    return checks


async def _model_checks(
    config: HermesConfig, environ: Mapping[str, str], home: Path
) -> list[Check]:
    from agent.providers.context_window import resolve_window
    from agent.providers.registry import API_KEY_ENV, resolve_settings
    from agent.providers.window_memory import WINDOW_MEMORY_FILE, WindowMemory

    try:
        settings = resolve_settings(config.model, environ)
    except MissingApiKey as exc:
        variable = API_KEY_ENV.get(config.model.provider, "model.api_key")
        return [
            Check(
                name="key",
                status="fail",
                says=exc.detail,
                fix=f"export {variable}=… or run `hermes setup`",
            ),
            Check(name="endpoint", status="skip", says="skipped without a key"),
        ]
    except HermesError as exc:
        return [Check(name="key", status="fail", says=str(exc), fix="run `hermes setup`")]
    source = _key_source(config, environ)
    key_line = "not needed (local server)" if not settings.api_key else f"from {source}"
    checks = [Check(name="key", status="ok", says=f"{settings.provider} key {key_line}")]
    probe = await probe_endpoint(settings.provider, settings.base_url, settings.api_key)
    says = probe_sentence(probe, key_source=f"the key in {source}")
    if probe.kind != "ok":
        fix = {
            "auth": f"put a valid key in {source}, or run `hermes setup`",
            "unreachable": "start the server, or correct model.base_url",
        }.get(probe.kind, "correct model.base_url")
        checks.append(Check(name="endpoint", status="fail", says=says, fix=fix))
        return checks
    checks.append(Check(name="endpoint", status="ok", says=says))
    checks.append(_model_check(settings.model, probe.models))
    memory = WindowMemory(home / WINDOW_MEMORY_FILE)
    window = await resolve_window(
        settings.model,
        config.model.context_length,
        base_url=settings.base_url,
        api_key=settings.api_key,
        learned=memory.learned(settings.base_url, settings.model),
        local=settings.provider == "custom",
    )
    status: CheckStatus = "warn" if window.source == "default" else "ok"
    says = f"{window.tokens:,} tokens ({WINDOW_SOURCES[window.source]})"
    if window.source == "learned":
        says += f", kept in {memory.path}"
    fit = memory.calibration(settings.base_url, settings.model)
    if fit is not None:
        says += f"; the server counts {fit.ratio:.2f}x our estimate"
    checks.append(Check(name="window", status=status, says=says, fix="set model.context_length"))
    return checks


def _model_check(model: str, listed: tuple[str, ...]) -> Check:
    if not listed:
        return Check(
            name="model",
            status="warn",
            says=f"{model}: the endpoint lists no models to check against",
        )
    if model in listed:
        return Check(name="model", status="ok", says=f"{model} is served")
    some = ", ".join(listed[:5])
    return Check(
        name="model",
        status="fail",
        says=f"{model} is not among the endpoint's {len(listed)} models ({some})",
        fix=f"hermes config set model.default {listed[0]}",
    )


def _key_source(config: HermesConfig, environ: Mapping[str, str]) -> str:
    from agent.providers.registry import API_KEY_ENV

    if config.model.api_key:
        return "model.api_key in config.yaml"
    return API_KEY_ENV.get(config.model.provider, "model.api_key")


async def _store_check(config: HermesConfig, home: Path, *, deep: bool) -> Check:
    from state import SqlSessionStore, default_url

    url = config.state.url or default_url(home)
    shown = url.split("@")[-1] if "@" in url else url  # no password in the report
    if url.startswith("sqlite") and not _sqlite_writable(url):
        return Check(
            name="store",
            status="fail",
            says=f"{shown} is not writable",
            fix="fix the permissions of HERMES_HOME",
        )
    try:
        store = await SqlSessionStore.open(url)
    except HermesError as exc:
        return Check(
            name="store",
            status="fail",
            says=str(exc),
            fix="check state.url and that the database runs",
        )
    try:
        problems = await store.check_integrity(full=deep)
    except HermesError as exc:
        problems = [str(exc)]
    finally:
        await store.aclose()
    checked = "every page checked" if deep else "quick check"
    if problems:
        return Check(
            name="store",
            status="fail",
            says=f"{shown} is damaged ({checked}: {_first_problem(problems)})",
            fix=RECOVERY_HINT,
        )
    from state.migrations import SCHEMA_VERSION

    return Check(
        name="store",
        status="ok",
        says=f"{shown} is writable, schema version {SCHEMA_VERSION}, sound ({checked})",
    )


def _first_problem(problems: list[str]) -> str:
    """SQLite's report starts with a "*** in database main ***" header; one line of it."""
    words = " ".join(" ".join(problems).split()).removeprefix("*** in database main ***")
    return words.strip()[:200]


def _sqlite_writable(url: str) -> bool:
    file = Path(url.split("///", 1)[-1])
    folder = file.parent
    if file.exists():
        return os.access(file, os.W_OK) and os.access(folder, os.W_OK)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return os.access(folder, os.W_OK)


def sandbox_check(config: HermesConfig, problem: str | None) -> Check:
    """Whether commands can run in the bubblewrap sandbox the setting asks for (pure)."""
    from agent.tools.sandbox import INSTALL_HINT

    mode = config.tools.terminal.sandbox
    if mode == "none":
        return Check(
            name="sandbox",
            status="warn",
            says="off (tools.terminal.sandbox: none): commands run with your rights, guarded "
            "by the shell policy alone",
            fix="set tools.terminal.sandbox: auto (see docs/sandbox.md)",
        )
    if problem is None:
        net = "with" if config.tools.terminal.network else "without"
        return Check(name="sandbox", status="ok", says=f"bubblewrap works ({mode}, {net} network)")
    return Check(
        name="sandbox",
        status="warn" if mode == "auto" else "fail",
        says=f"{problem}: commands where nobody can approve are refused"
        if mode == "auto"
        else f"{problem}: hermes will not start (tools.terminal.sandbox: bwrap)",
        fix=INSTALL_HINT,
    )


def _gateway_checks(config: HermesConfig, environ: Mapping[str, str]) -> list[Check]:
    gw = config.gateway
    wanted = [
        ("telegram", gw.telegram.enabled, gw.telegram.token, "TELEGRAM_BOT_TOKEN"),
        ("discord", gw.discord.enabled, gw.discord.token, "DISCORD_BOT_TOKEN"),
        ("http", gw.http.enabled, gw.http.api_key or bool(gw.http.keys), "HERMES_API_KEY"),
    ]
    checks = []
    for name, enabled, token, variable in wanted:
        if not enabled:
            continue
        if token or environ.get(variable):
            checks.append(Check(name=name, status="ok", says="enabled, its token is set"))
        else:
            key = "api_key" if name == "http" else "token"
            checks.append(
                Check(
                    name=name,
                    status="fail",
                    says="enabled but has no token",
                    fix=f"export {variable}=… or set gateway.{name}.{key}",
                )
            )
    if not checks:
        checks.append(
            Check(
                name="gateway",
                status="ok",
                says="no platform enabled (only `hermes gateway run` needs one)",
            )
        )
    return checks

"""Logging setup and secret redaction: global state department for structlog and stdlib logging.

`configure_logging` is the one place that touches process-wide logging state. It routes structlog
events and stdlib records (httpx, telegram, discord, ...) through the same stdlib handlers: a
human-readable console renderer on stderr and JSON lines appended to `log_dir/agent.log`, which
rotates by size (`agent.log.1` is the newest old file). Both pass through `redact_secrets` first
(fields named like secrets, then `agent.redaction`'s one redactor on every value), so keys and
tokens never reach a terminal or a file.

Chatty libraries start quiet (`QUIET_LOGGERS`: httpx logs every request at info, aiosqlite every
statement at debug); `loggers` overrides any logger's level. A warning the user must act on
carries an `action` (one sentence saying what to do); without the full console it is still
shown on stderr, once per process, as `hermes: warning: <action>`.
"""

from __future__ import annotations

import logging
import logging.handlers
import re
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from agent.redaction import REDACTED, redact_text

__all__ = [
    "LOG_FILE_NAME",
    "ACTION_KEY",
    "QUIET_LOGGERS",
    "configure_logging",
    "redact_secrets",
    "shutdown_logging",
]

LOG_FILE_NAME = "agent.log"
QUIET_LOGGERS: Mapping[str, str] = {
    "httpx": "warning",
    "httpx2": "warning",
    "httpcore": "warning",
    "httpcore2": "warning",
    "aiosqlite": "warning",
    "asyncpg": "warning",
    "discord": "warning",
    "telegram": "warning",
    "anthropic": "warning",
    "openai": "warning",
}
"""Libraries that log every request or statement; `configure_logging(loggers=...)` overrides."""
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_BACKUPS = 5
ACTION_KEY = "action"
"""A warning's field saying, in one sentence, what the user should do (shown on the console)."""

_SENSITIVE_KEY_RE = re.compile(
    r"(^|[_.-])(api_?key|x_api_key|token|access_token|refresh_token|secret|client_secret"
    r"|password|passwd|authorization|auth|cookie|set_cookie|credentials?|private_key)$",
    re.IGNORECASE,
)
_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
_levels_set: dict[str, int] = {}
"""Loggers whose level `configure_logging` set, with the level each had before (global state)."""


def redact_secrets(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: scrub secrets from every value, by key name and by shape."""
    return {key: _redact_value(key, value) for key, value in event_dict.items()}


def configure_logging(
    *,
    log_dir: Path | None,
    level: str = "info",
    console: bool = True,
    loggers: Mapping[str, str] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    backups: int = DEFAULT_BACKUPS,
) -> None:
    """Send structlog and stdlib logging to stderr (readable) and `log_dir/agent.log` (JSON lines,
    rotated at `max_bytes`, `backups` old files kept). Without `console`, stderr still shows each
    warning that carries an `action`, once.

    Calling it again replaces the handlers it installed before; it never stacks them.
    """
    numeric_level = _level(level)
    levels = {name: _level(value) for name, value in {**QUIET_LOGGERS, **(loggers or {})}.items()}
    shutdown_logging()
    pre_chain: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    handlers: list[logging.Handler] = []
    if console:
        renderer = _console_renderer(colors=sys.stderr.isatty())
        handlers.append(_handler(logging.StreamHandler(sys.stderr), renderer, pre_chain))
    else:
        actions = _handler(logging.StreamHandler(sys.stderr), _render_action, pre_chain)
        actions.addFilter(_OncePerAction())
        handlers.append(actions)
    unwritable: OSError | None = None
    if log_dir is not None:
        try:
            file_handler = _log_file(log_dir, max_bytes=max_bytes, backups=backups)
        except OSError as exc:  # a read-only HERMES_HOME, a full disk: log to stderr instead
            unwritable = exc
            if not console:
                fallback = logging.StreamHandler(sys.stderr)
                fallback.setLevel(logging.WARNING)
                renderer = _console_renderer(colors=False)
                handlers.append(_handler(fallback, renderer, pre_chain))
        else:
            handlers.append(_handler(file_handler, structlog.processors.JSONRenderer(), pre_chain))
    root = logging.getLogger()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(numeric_level)
    _set_logger_levels(levels)
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *pre_chain,
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    if unwritable is not None and log_dir is not None:
        reason = unwritable.strerror or type(unwritable).__name__
        print(
            f"hermes: warning: cannot write {log_dir / LOG_FILE_NAME} ({reason}); "
            "warnings go to stderr instead",
            file=sys.stderr,
        )


def _log_file(log_dir: Path, *, max_bytes: int, backups: int) -> logging.Handler:
    log_dir.mkdir(parents=True, exist_ok=True)
    return _QuietFileHandler(
        log_dir / LOG_FILE_NAME, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
    )


class _QuietFileHandler(logging.handlers.RotatingFileHandler):
    """agent.log that fails quietly: when a write fails (a full disk), one sentence goes to
    stderr and the records that follow are dropped until a write succeeds again, instead of
    the standard library's "--- Logging error ---" traceback for every record."""

    _failing = False
    _failed_now = False

    def emit(self, record: logging.LogRecord) -> None:
        self._failed_now = False
        super().emit(record)  # a failure inside comes back through `handleError`
        if not self._failed_now:
            self._failing = False  # it got through: the next failure is news again

    def close(self) -> None:
        try:
            super().close()
        except OSError:  # what is still buffered cannot be written either: drop it
            stream, self.stream = self.stream, None
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
            logging.Handler.close(self)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (stdlib name)
        self._failed_now = True
        if self._failing:
            return
        self._failing = True
        error = sys.exc_info()[1]
        reason = getattr(error, "strerror", None) or type(error).__name__
        print(
            f"hermes: warning: cannot write {self.baseFilename} ({reason}); "
            "log records are dropped until it can",
            file=sys.stderr,
        )


def shutdown_logging() -> None:
    """Remove and close the handlers `configure_logging` installed (flushing agent.log), and
    give the loggers it quietened their own levels back."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_hermes", False):
            root.removeHandler(handler)
            handler.close()
    _set_logger_levels({})


def _set_logger_levels(levels: Mapping[str, int]) -> None:
    for name, before in _levels_set.items():
        logging.getLogger(name).setLevel(before)
    _levels_set.clear()
    for name, value in levels.items():
        logger = logging.getLogger(name)
        _levels_set[name] = logger.level
        logger.setLevel(value)


def _level(name: str) -> int:
    numeric = _LEVELS.get(name.lower())
    if numeric is None:
        raise ValueError(f"unknown log level {name!r}; use one of {', '.join(_LEVELS)}")
    return numeric


class _OncePerAction(logging.Filter):
    """Pass warnings that carry an action, each action once for this handler's life."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        event = record.msg if isinstance(record.msg, dict) else None
        if record.levelno < logging.WARNING or event is None or not event.get(ACTION_KEY):
            return False
        action = str(event[ACTION_KEY])
        if action in self._seen:
            return False
        self._seen.add(action)
        return True


def _console_renderer(*, colors: bool) -> structlog.dev.ConsoleRenderer:
    # Exceptions reach it already formatted (`format_exc_info` runs first): plain, so the
    # renderer's choice never depends on whether rich was importable when structlog loaded.
    return structlog.dev.ConsoleRenderer(
        colors=colors, exception_formatter=structlog.dev.plain_traceback
    )


def _render_action(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> str:
    return f"hermes: {event_dict.get('level', 'warning')}: {event_dict.get(ACTION_KEY, '')}"


def _handler(
    handler: logging.Handler, renderer: Processor, pre_chain: list[Processor]
) -> logging.Handler:
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=pre_chain,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                redact_secrets,
                renderer,
            ],
        )
    )
    handler._hermes = True  # type: ignore[attr-defined]  # marks it as ours for shutdown
    return handler


def _redact_value(key: object, value: Any) -> Any:
    if isinstance(key, str) and value is not None and _SENSITIVE_KEY_RE.search(key):
        if not isinstance(value, bool | int | float):
            return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping | MutableMapping):
        return {k: _redact_value(k, v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_redact_value(None, v) for v in value]
    if isinstance(value, bytes | int | float | bool) or value is None:
        return value
    return redact_text(str(value))

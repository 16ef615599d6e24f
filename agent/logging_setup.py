"""Logging setup and secret redaction: global state department for structlog and stdlib logging.

`configure_logging` is the one place that touches process-wide logging state. It routes structlog
events and stdlib records (httpx, telegram, discord, ...) through the same stdlib handlers: a
human-readable console renderer on stderr and JSON lines appended to `log_dir/agent.log`. Both
pass through `redact_secrets` first (fields named like secrets, then `agent.redaction`'s one
redactor on every value), so keys and tokens never reach a terminal or a file.
"""

from __future__ import annotations

import logging
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
    "configure_logging",
    "redact_secrets",
    "shutdown_logging",
]

LOG_FILE_NAME = "agent.log"

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


def redact_secrets(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: scrub secrets from every value, by key name and by shape."""
    return {key: _redact_value(key, value) for key, value in event_dict.items()}


def configure_logging(*, log_dir: Path | None, level: str = "info", console: bool = True) -> None:
    """Send structlog and stdlib logging to stderr (readable) and `log_dir/agent.log` (JSON lines).

    Calling it again replaces the handlers it installed before; it never stacks them.
    """
    numeric_level = _LEVELS.get(level.lower())
    if numeric_level is None:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(_LEVELS)}")
    shutdown_logging()
    pre_chain: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    handlers: list[logging.Handler] = []
    if console:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        handlers.append(_handler(logging.StreamHandler(sys.stderr), renderer, pre_chain))
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        file_handler = logging.FileHandler(log_dir / LOG_FILE_NAME, mode="a", encoding="utf-8")
        handlers.append(_handler(file_handler, structlog.processors.JSONRenderer(), pre_chain))
    root = logging.getLogger()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(numeric_level)
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


def shutdown_logging() -> None:
    """Remove and close the handlers `configure_logging` installed (flushing agent.log)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_hermes", False):
            root.removeHandler(handler)
            handler.close()


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

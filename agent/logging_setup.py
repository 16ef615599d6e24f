"""Logging setup and secret redaction: global state department for structlog and stdlib logging.

`configure_logging` is the one place that touches process-wide logging state. It routes structlog
events and stdlib records (httpx, telegram, discord, ...) through the same stdlib handlers: a
human-readable console renderer on stderr and JSON lines appended to `log_dir/agent.log`. Both
pass through `redact_secrets` first, so keys and tokens never reach a terminal or a file.

The registry of known secret values (`register_secret`) is module state on purpose: config loading
registers the keys it read, and every later log line is scrubbed of them.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

__all__ = [
    "LOG_FILE_NAME",
    "REDACTED",
    "configure_logging",
    "redact_secrets",
    "redact_registered",
    "redact_text",
    "register_secret",
    "shutdown_logging",
]

REDACTED = "[REDACTED]"
LOG_FILE_NAME = "agent.log"
MIN_SECRET_CHARS = 8
"""Registered values shorter than this are ignored: redacting them would garble ordinary words."""

_SENSITIVE_KEY_RE = re.compile(
    r"(^|[_.-])(api_?key|x_api_key|token|access_token|refresh_token|secret|client_secret"
    r"|password|passwd|authorization|auth|cookie|set_cookie|credentials?|private_key)$",
    re.IGNORECASE,
)
_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {REDACTED}"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), REDACTED),
    (re.compile(r"(?<!\d)\d{6,}:[A-Za-z0-9_-]{30,}"), REDACTED),
    (re.compile(r"[\w-]{24,}\.[\w-]{6}\.[\w-]{27,}"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), REDACTED),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}"), REDACTED),
    (
        re.compile(r"(?i)\b(api[_-]?key|token|secret|password|access_token)=[^&\s\"']+"),
        rf"\1={REDACTED}",
    ),
)
_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

_lock = threading.Lock()
_secrets: frozenset[str] = frozenset()
_secrets_re: re.Pattern[str] | None = None


def register_secret(value: str | None) -> None:
    """Redact `value` wherever it appears in later log lines, even if it matches no pattern."""
    global _secrets, _secrets_re
    if not value or len(value) < MIN_SECRET_CHARS:
        return
    with _lock:
        if value in _secrets:
            return
        _secrets = _secrets | {value}
        ordered = sorted(_secrets, key=len, reverse=True)
        _secrets_re = re.compile("|".join(re.escape(s) for s in ordered))


def redact_registered(text: str) -> str:
    """`text` with the registered secrets (our own keys and tokens) replaced; nothing else.

    Tool output passes through this before the model, the store or a summary sees it.
    """
    known = _secrets_re
    return known.sub(REDACTED, text) if known is not None else text


def redact_text(text: str) -> str:
    """`text` with every registered secret and every key-shaped string replaced."""
    if (known := _secrets_re) is not None:
        text = known.sub(REDACTED, text)
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


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

"""The one secret redactor, and the registry of known secret values (a global state department).

`redact_text` replaces two kinds of secrets with `[REDACTED]`:

- **registered values** (`register_secret`: our API keys and bot tokens, and every environment
  variable whose name says it holds a secret) and their simple encodings: upper and lower case
  (`tr a-z A-Z`), reversed (`rev`), rot13 (`tr a-zA-Z n-za-mN-ZA-M`), hex (`xxd -p`, `od`-free
  one-line hex, either case), percent-encoding, and base64 in the standard and URL-safe alphabets
  at any of the three byte alignments (so `env | base64` cannot smuggle a key out: the stable
  middle of its encoding is matched wherever the value sat in the stream);
- **key shapes**: `sk-`/`sk-ant-`/`sk-proj-` keys, GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`,
  `ghr_`, `github_pat_`), Slack `xox?-` tokens, AWS access key ids (`AKIA…`, `ASIA…`), Google
  `AIza…` keys, JWTs, Telegram and Discord bot tokens, PEM private-key blocks, `Bearer`/`Basic`
  credentials, `NAME=value` and `name: value` where the name says key/token/secret/password, and
  long hex or base64 blobs within a few words after such a name.

Tool output, summaries, every row the agent stores and every log line pass through it. The
registry is module state on purpose: start-up registers what it read, and every later call is
scrubbed of it. Values shorter than `MIN_SECRET_CHARS` are ignored (they would garble words).
"""

from __future__ import annotations

import base64
import codecs
import re
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

__all__ = [
    "MIN_SECRET_CHARS",
    "REDACTED",
    "encodings_of",
    "is_secret_name",
    "redact_message",
    "redact_text",
    "register_secret",
]

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 8
_MIN_VARIANT_CHARS = 8
"""An encoded fragment shorter than this is not matched (too likely to occur by chance)."""

_SECRET_NAME_RE = re.compile(
    r"(api_?key|apikey|access_?key|secret|token|password|passwd|credential|private_?key|auth)",
    re.IGNORECASE,
)
_NOT_SECRET_NAMES = frozenset({"max_tokens", "tokens", "token_count", "keyboard", "author"})
_SHAPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S
        ),
        REDACTED,
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {REDACTED}"),
    (re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}"), REDACTED),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{16,}|\bgithub_pat_[A-Za-z0-9_]{22,}"), REDACTED),
    (re.compile(r"\bxox[abeprs]-[A-Za-z0-9-]{8,}"), REDACTED),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), REDACTED),
    (re.compile(r"(?<!\d)\d{6,}:[A-Za-z0-9_-]{30,}"), REDACTED),
    # Anchored at the start of a run: unanchored, a long run of word characters is rescanned
    # from every position (quadratic: 60 KB of "=" took 6 s).
    (re.compile(r"(?<![\w-])[\w-]{24,}\.[\w-]{6}\.[\w-]{27,}"), REDACTED),
    # NAME=value as in an environment or a query string: `api_key=…`, `MY_SERVICE_TOKEN=…`
    (
        re.compile(r"(?i)\b(api[_-]?key|token|secret|password|access_token)=[^&\s\"']+"),
        rf"\1={REDACTED}",
    ),
    (
        re.compile(
            r"\b([A-Z][A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH)[A-Z0-9_]*)"
            r"=(?![\[])[^\s\"']{8,}"
        ),
        rf"\1={REDACTED}",
    ),
)
_NAMED_VALUE_RE = re.compile(  # anchored at a name's start, so long dotted runs scan once
    r"(?i)(?<![\w.-])([\w.-]*(?:api[_-]?key|apikey|access[_-]?key|secret|token|password|passwd|credential"
    r"|private[_-]?key)[\w.-]*)(\"?'?\s*[:=]\s*[\"']?)([^\s\"',;&]{4,})"
)
_NEAR_BLOB_RE = re.compile(
    r"(?is)\b(key|token|secret|password|credential)s?\b(.{0,40}?)"
    r"(?<![A-Za-z0-9+/_-])([A-Fa-f0-9]{32,}|[A-Za-z0-9+/_-]{32,}={0,2})(?![A-Za-z0-9+/_-])"
)

_lock = threading.Lock()
_secrets: frozenset[str] = frozenset()
_secrets_re: re.Pattern[str] | None = None


def register_secret(value: str | None) -> None:
    """Redact `value` and its simple encodings wherever they appear from now on."""
    global _secrets, _secrets_re
    if not value or len(value) < MIN_SECRET_CHARS:
        return
    with _lock:
        if value in _secrets:
            return
        _secrets = _secrets | {value}
        variants = {v for s in _secrets for v in encodings_of(s)}
        ordered = sorted(variants, key=len, reverse=True)
        _secrets_re = re.compile("|".join(re.escape(v) for v in ordered))


def is_secret_name(name: str) -> bool:
    """Whether an environment variable or field called `name` holds a secret by its name."""
    lowered = name.lower()
    return lowered not in _NOT_SECRET_NAMES and _SECRET_NAME_RE.search(name) is not None


def encodings_of(value: str) -> set[str]:
    """`value` and the encodings of it that `redact_text` also matches."""
    raw = value.encode()
    found = {value, value.upper(), value.lower(), value[::-1], codecs.encode(value, "rot13")}
    found |= {raw.hex(), raw.hex().upper(), quote(value, safe="")}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        found |= set(_base64_fragments(raw, encode))
    return {v for v in found if len(v) >= _MIN_VARIANT_CHARS}


def redact_text(text: str) -> str:
    """`text` with every registered secret, its encodings and every key-shaped string replaced."""
    if not text:
        return text
    if (known := _secrets_re) is not None:
        text = known.sub(REDACTED, text)
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    text = _NAMED_VALUE_RE.sub(_named_value, text)
    return _NEAR_BLOB_RE.sub(_near_blob, text)


def redact_message(message: Any) -> Any:
    """A chat message (dict) with its text content and tool-call arguments redacted."""
    out = dict(message)
    content = out.get("content")
    if isinstance(content, str):
        out["content"] = redact_text(content)
    elif isinstance(content, list):
        out["content"] = [_redact_block(block) for block in content]
    calls = out.get("tool_calls")
    if calls:
        out["tool_calls"] = [_redact_call(call) for call in calls]
    return out


def _redact_block(block: Any) -> Any:
    if isinstance(block, dict) and isinstance(block.get("text"), str):
        return {**block, "text": redact_text(block["text"])}
    return block


def _redact_call(call: Any) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
        return call
    return {**call, "function": {**function, "arguments": redact_text(function["arguments"])}}


def _named_value(match: re.Match[str]) -> str:
    name, sep, value = match.group(1), match.group(2), match.group(3)
    if REDACTED in value or name.lower() in _NOT_SECRET_NAMES or not _looks_secret(name, value):
        return match.group(0)
    return f"{name}{sep}{REDACTED}"


def _looks_secret(name: str, value: str) -> bool:
    """Passwords are secret whatever they look like; keys and tokens look like keys."""
    if re.search(r"(?i)pass|secret", name):
        return True
    return len(value) >= 8 and bool(re.search(r"\d", value)) and bool(re.search(r"[A-Za-z]", value))


def _near_blob(match: re.Match[str]) -> str:
    blob = match.group(3)
    is_hex = re.fullmatch(r"[A-Fa-f0-9]+", blob) is not None
    mixed = all(re.search(p, blob) for p in (r"[a-z]", r"[A-Z]", r"\d"))
    if not (is_hex or mixed):
        return match.group(0)
    return match.group(0)[: match.start(3) - match.start()] + REDACTED


def _base64_fragments(raw: bytes, encode: Any) -> Iterator[str]:
    """The parts of base64(…value…) fixed by the value alone, at each of the three alignments."""
    whole = encode(raw).decode()
    yield whole
    yield whole.rstrip("=")
    for offset in range(3):
        encoded = encode(b"\0" * offset + raw).decode().rstrip("=")
        start = 4 if offset else 0  # the first group mixes in bytes before the value
        yield encoded[start:-4]  # the last group mixes in bytes after it

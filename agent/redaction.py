"""The one secret redactor, and the registry of known secret values (a global state department).

`redact_text` replaces two kinds of secrets with `[REDACTED]`:

- **registered values** (`register_secret`: our API keys and bot tokens, every environment
  variable whose name says it holds a secret, and the password of every URL with credentials
  in the environment, `DATABASE_URL` included) and their simple encodings: upper and lower case
  (`tr a-z A-Z`), reversed (`rev`), rot13 (`tr a-zA-Z n-za-mN-ZA-M`), hex (`xxd -p`, either
  case, and the hex and text columns of a plain `xxd` dump), percent-encoding, base64 in the
  standard and URL-safe alphabets at any of the three byte alignments and base32 at any of the
  five (so `env | base64` cannot smuggle a key out: the stable middle of its encoding is matched
  wherever the value sat in the stream), and any of these spread over whitespace (`fold -w6`,
  `sed 's/./& /g'`, a wrapped `base64`);
- **key shapes**: `sk-`/`sk-ant-`/`sk-proj-` keys, GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`,
  `ghr_`, `github_pat_`), Slack `xox?-` tokens, AWS access key ids (`AKIA…`, `ASIA…`), Google
  `AIza…` keys, JWTs, Telegram and Discord bot tokens, PEM private-key blocks, `Bearer`/`Basic`
  credentials, `NAME=value` and `name: value` where the name says key/token/secret/password, and
  long hex or base64 blobs within a few words after such a name; credentials in URLs
  (`postgres://user:PASS@`), `password` in `.netrc`, `.pgpass` lines, XML elements and
  attributes, `mysql -pPASS`, `--password X`, `curl -u user:PASS`, `sshpass -p X`, webhook URLs
  (Slack, Discord, Teams, Zapier), and well-known prefixes (Stripe `sk_live_`, `whsec_`, GitLab
  `glpat-`, npm `npm_`, PyPI `pypi-`, Hugging Face `hf_`, SendGrid `SG.`, Vault `hvs.`, Google
  `ya29.`, DigitalOcean `dop_v1_`, Shopify `shpat_`, Databricks `dapi`, Groq `gsk_`, xAI `xai-`).

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
    "url_passwords",
]

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 8
_MIN_VARIANT_CHARS = 8
"""An encoded fragment shorter than this is not matched (too likely to occur by chance)."""
_MIN_SPREAD_CHARS = 10
"""Matched across whitespace only from this length (short runs across words are common)."""
_URL_PASSWORD_RE = re.compile(  # anchored where a scheme can start, so a long run scans once
    r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*://[^/\s:@'\"]+:)([^@\s/'\"]+)@"
)

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
    (_URL_PASSWORD_RE, rf"\1{REDACTED}@"),
    (
        re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*://)([A-Za-z0-9_-]{20,})@"),
        rf"\1{REDACTED}@",
    ),
    (
        re.compile(
            r"(?i)\b(https?://(?:hooks\.slack\.com/(?:services|workflows|triggers)/"
            r"|(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/"
            r"|[\w.-]+\.webhook\.office\.com/|outlook\.office\.com/webhook/"
            r"|hooks\.zapier\.com/hooks/catch/))[^\s\"'<>]+"
        ),
        rf"\1{REDACTED}",
    ),
    (
        re.compile(
            r"\b(?:(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{10,}|whsec_[A-Za-z0-9]{20,}"
            r"|glpat-[\w-]{20,}|npm_[A-Za-z0-9]{36}|pypi-AgE[\w-]{40,}|hf_[A-Za-z0-9]{30,}"
            r"|SG\.[\w-]{16,}\.[\w-]{16,}|hvs\.[\w-]{20,}|ya29\.[\w-]{20,}"
            r"|do[opr]_v1_[a-f0-9]{64}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}|dapi[a-f0-9]{32}"
            r"|gsk_[A-Za-z0-9]{40,}|xai-[A-Za-z0-9]{40,}|xapp-[\w-]{20,}|key-[0-9a-f]{32}"
            r"|sq0(?:atp|csp)-[\w-]{22,}|lin_api_[A-Za-z0-9]{30,}|PMAK-[a-f0-9]{24}-[a-f0-9]{34})"
        ),
        REDACTED,
    ),
    # .netrc (`machine h login u password p`, one line or one token per line) and .pgpass
    (
        re.compile(r"(?i)(\b(?:machine|login|account|default)\b[^\n]{0,200}?\bpassword\s+)(\S+)"),
        rf"\1{REDACTED}",
    ),
    (re.compile(r"(?im)^(\s*password\s+)(?!\[REDACTED\])(\S+)\s*$"), rf"\1{REDACTED}"),
    (
        re.compile(r"(?m)^([^:\s#]+:(?:\d+|\*):[^:\s]+:[^:\s]+:)(?!\[REDACTED\])(\S+)$"),
        rf"\1{REDACTED}",
    ),
    # XML: <password>p</password>, <db:secret>…</db:secret>, key="Password" value="p"
    (
        re.compile(
            r"(?i)(<((?:[\w.-]+:)?[\w.-]*(?:password|passwd|secret|token|api_?key|credential)"
            r"[\w.-]*)(?:\s[^>]*)?>)([^<]+)(</\2>)"
        ),
        rf"\1{REDACTED}\4",
    ),
    (
        re.compile(
            r"(?i)(\bkey\s*=\s*[\"'][^\"']*(?:password|secret|token)[^\"']*[\"']\s+value\s*=\s*"
            r"[\"'])([^\"']+)"
        ),
        rf"\1{REDACTED}",
    ),
    # command-line passwords: mysql -pPASS, --password X, curl -u user:PASS, sshpass -p X
    (
        re.compile(
            r"(\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mariadb|mariadb-dump)\b"
            r"[^\n|;&]{0,200}?\s-p)(?!\[REDACTED\])([^\s'\"]+)"
        ),
        rf"\1{REDACTED}",
    ),
    (
        re.compile(r"(--pass(?:word|wd)(?:=|\s+))(?!\[REDACTED\])([^\s'\"-][^\s'\"]*)"),
        rf"\1{REDACTED}",
    ),
    (
        re.compile(r"((?:^|\s)(?:-u|--user|--proxy-user|-U)\s*['\"]?[^\s:'\"]+:)([^\s'\"@]+)"),
        rf"\1{REDACTED}",
    ),
    (re.compile(r"(\bsshpass\s+-p\s*)(\S+)"), rf"\1{REDACTED}"),
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
_spread_re: re.Pattern[str] | None = None
_XXD_LINE_RE = re.compile(r"(?m)^[0-9a-f]{6,8}: ((?:[0-9a-f]{2,4} ?){1,8}) +(.{1,16})$")


def register_secret(value: str | None) -> None:
    """Redact `value` and its simple encodings wherever they appear from now on."""
    global _secrets, _secrets_re, _spread_re
    if not value or len(value) < MIN_SECRET_CHARS:
        return
    with _lock:
        if value in _secrets:
            return
        _secrets = _secrets | {value}
        variants = {v for s in _secrets for v in encodings_of(s)}
        ordered = sorted(variants, key=len, reverse=True)
        _secrets_re = re.compile("|".join(re.escape(v) for v in ordered))
        spread = [re.escape(v) for v in ordered if len(v) >= _MIN_SPREAD_CHARS]
        _spread_re = re.compile("|".join(spread)) if spread else None


def url_passwords(text: str) -> list[str]:
    """The passwords of URLs with credentials in `text` (`postgres://u:PASS@h`), to register."""
    return [m.group(2) for m in _URL_PASSWORD_RE.finditer(text)]


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
    found |= set(_base32_fragments(raw))
    return {v for v in found if len(v) >= _MIN_VARIANT_CHARS}


def redact_text(text: str) -> str:
    """`text` with every registered secret, its encodings and every key-shaped string replaced."""
    if not text:
        return text
    if (known := _secrets_re) is not None:
        text = known.sub(REDACTED, text)
        text = _redact_xxd(text, known)
    if (spread := _spread_re) is not None:
        text = _redact_spread(text, spread)
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


def _redact_spread(text: str, pattern: re.Pattern[str]) -> str:
    """`text` with registered values redacted where whitespace splits them (`fold -w6`)."""
    kept = [i for i, c in enumerate(text) if not c.isspace()]
    if len(kept) == len(text):
        return text
    compact = "".join(text[i] for i in kept)
    out: list[str] = []
    last = 0
    for match in pattern.finditer(compact):
        start, end = kept[match.start()], kept[match.end() - 1] + 1
        out += [text[last:start], REDACTED]
        last = end
    return "".join(out) + text[last:] if out else text


def _redact_xxd(text: str, known: re.Pattern[str]) -> str:
    """A plain `xxd` dump: a registered value in its hex or its text column, across lines,
    redacts the lines that hold it."""
    lines = list(_XXD_LINE_RE.finditer(text))
    if len(lines) < 1:
        return text
    hexes = "".join(m.group(1).replace(" ", "") for m in lines)
    texts = "".join(m.group(2).ljust(16) for m in lines)
    if not (known.search(hexes) or known.search(texts)):
        return text
    first, last = lines[0].start(), lines[-1].end()
    return text[:first] + f"{REDACTED} ({len(lines)} lines of a hex dump)" + text[last:]


def _base32_fragments(raw: bytes) -> Iterator[str]:
    """The parts of base32(…value…) fixed by the value alone, at each of the five alignments."""
    for upper in (True, False):
        whole = base64.b32encode(raw).decode()
        yield whole if upper else whole.lower()
        for offset in range(5):
            encoded = base64.b32encode(b"\0" * offset + raw).decode().rstrip("=")
            start = 8 if offset else 0  # the first group mixes in bytes before the value
            fragment = encoded[start:-8]  # the last group mixes in bytes after it
            yield fragment if upper else fragment.lower()


def _base64_fragments(raw: bytes, encode: Any) -> Iterator[str]:
    """The parts of base64(…value…) fixed by the value alone, at each of the three alignments."""
    whole = encode(raw).decode()
    yield whole
    yield whole.rstrip("=")
    for offset in range(3):
        encoded = encode(b"\0" * offset + raw).decode().rstrip("=")
        start = 4 if offset else 0  # the first group mixes in bytes before the value
        yield encoded[start:-4]  # the last group mixes in bytes after it

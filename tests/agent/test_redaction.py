"""The one redactor: key shapes, registered values and their simple encodings, messages."""

from __future__ import annotations

import base64
import codecs
import time
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from agent import redaction
from agent.redaction import (
    REDACTED,
    encodings_of,
    is_secret_name,
    redact_message,
    redact_text,
    register_secret,
    url_passwords,
)

SECRET = "plain-Words-secret-42"
"""Registered; shaped like nothing, so only the registry can catch it."""


@pytest.fixture(autouse=True)
def _fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with an empty registry and leaves none behind."""
    monkeypatch.setattr(redaction, "_secrets", frozenset())
    monkeypatch.setattr(redaction, "_secrets_re", None)
    monkeypatch.setattr(redaction, "_spread_re", None)
    yield


def _b64_in_stream(prefix: str, value: str, suffix: str) -> str:
    return base64.b64encode(f"{prefix}{value}{suffix}".encode()).decode()


@pytest.mark.parametrize(
    ("name", "encode"),
    [
        ("as is", lambda v: v),
        ("upper (tr a-z A-Z)", str.upper),
        ("lower", str.lower),
        ("reversed (rev)", lambda v: v[::-1]),
        ("rot13 (tr a-zA-Z n-za-mN-ZA-M)", lambda v: codecs.encode(v, "rot13")),
        ("hex (xxd -p)", lambda v: v.encode().hex()),
        ("HEX", lambda v: v.encode().hex().upper()),
        ("percent-encoded", lambda v: quote(v, safe="")),
        ("base64", lambda v: base64.b64encode(v.encode()).decode()),
        ("base64 of value + newline (echo | base64)", lambda v: _b64_in_stream("", v, "\n")),
        ("base64 url-safe", lambda v: base64.urlsafe_b64encode(v.encode()).decode()),
        ("base64, 1 byte before (env | base64)", lambda v: _b64_in_stream("K=", v, "\nX=1")),
        ("base64, 2 bytes before", lambda v: _b64_in_stream("KY=", v, "\n")),
        ("base64, 3 bytes before", lambda v: _b64_in_stream("KEY=", v, "\nA=b")),
    ],
)
def test_registered_values_are_caught_in_every_simple_encoding(name: str, encode: object) -> None:
    """A registered value is replaced as written and in each encoding a command can produce."""
    register_secret(SECRET)
    encoded = encode(SECRET)  # type: ignore[operator]
    out = redact_text(f"output: {encoded} end")
    assert REDACTED in out, name
    assert not any(len(v) >= 12 and v in out for v in encodings_of(SECRET)), name


@pytest.mark.parametrize(
    "leak",
    [
        "sk-ant-api03-" + "A1b2C3d4" * 6,
        "sk-proj-" + "Z9y8X7w6" * 5,
        "sk-" + "a1B2c3D4e5F6g7H8i9J0",
        "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
        "gho_" + "a1B2c3D4e5F6g7H8i9J0k1L2",
        "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "xoxb-1234567890-abcdefghij",
        "AKIAIOSFODNN7EXAMPLE",
        "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
        "MTA4NzY1NDMyMTA5ODc2NTQzMg.GhIjKl.abcdefghijklmnopqrstuvwxyz0123",
    ],
)
def test_key_shapes_are_caught_without_registration(leak: str) -> None:
    """Keys nobody registered are recognised by their shape."""
    out = redact_text(f"found {leak} in the output")
    assert leak not in out and REDACTED in out


@pytest.mark.parametrize(
    ("text", "leak"),
    [
        ("MY_SERVICE_TOKEN=4f9a8b7c6d5e4f3a", "4f9a8b7c6d5e4f3a"),
        ("DB_PASSWORD=hunter2hunter2", "hunter2hunter2"),
        ("url?api_key=abc123&x=1", "abc123"),
        ('{"client_secret": "s3cr3t-v4lue"}', "s3cr3t-v4lue"),
        ("password: correct-horse", "correct-horse"),
        ("the token is\n  4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c", "4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"),
        (
            "secret key: Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MEFCQ0RFRg==",
            "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MEFCQ0RFRg",
        ),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA\n-----END OPENSSH PRIVATE KEY-----",
            "b3BlbnNzaA",
        ),
        ("Authorization: Bearer abc.def-ghi_123", "abc.def-ghi_123"),
    ],
)
def test_named_values_and_blobs_near_key_words_are_caught(text: str, leak: str) -> None:
    """NAME=value, `name: value` and long blobs right after key/token/secret are redacted."""
    assert leak not in redact_text(text)


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens: 4096 and the tokens were counted; the key idea is simple",
        "input_tokens: 123456789",
        "sk-learn is fine",
        "commit 4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c0d1e2f3a landed",
        "TOKENIZERS_PARALLELISM=false",
        "session 1234567:short",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    """Counts, hashes and words that merely mention tokens are not mangled."""
    assert redact_text(text) == text


def test_short_values_are_not_registered() -> None:
    """A value under MIN_SECRET_CHARS would garble ordinary words, so it is ignored."""
    register_secret("short")
    register_secret(None)
    assert redact_text("a short story") == "a short story"


def test_messages_are_redacted_in_text_blocks_and_tool_arguments() -> None:
    """Content strings, text blocks and tool-call arguments all pass the redactor."""
    register_secret(SECRET)
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": f"using {SECRET}"}, {"type": "image", "x": 1}],
        "tool_calls": [
            {
                "id": "c",
                "type": "function",
                "function": {"name": "t", "arguments": f'{{"k": "{SECRET}"}}'},
            }
        ],
    }
    out = redact_message(message)
    assert SECRET not in str(out) and out["content"][1] == {"type": "image", "x": 1}
    assert message["content"][0]["text"] == f"using {SECRET}"  # the input is not mutated


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("MY_SERVICE_TOKEN", True),
        ("ANTHROPIC_API_KEY_2", True),
        ("GH_TOKEN", True),
        ("DB_PASSWORD", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("PATH", False),
        ("HOME", False),
        ("LANG", False),
        ("KEYBOARD", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    """Start-up registers every variable whose name says it holds a secret."""
    assert is_secret_name(name) is secret


@pytest.mark.parametrize(
    "text",
    [
        "r" * 60_000,
        "ab." * 20_000,
        ("x" * 30 + ".") * 2_000,
        "a.b-c_" * 10_000,
        "=" * 60_000,
        "login x " * 8_000,
        "mysql " * 10_000,
        "a:b " * 15_000,
        "--password " * 6_000,
    ],
)
def test_redaction_stays_linear_on_long_runs(text: str) -> None:
    """Tool output is often long and repetitive: no pattern may rescan a run from every position.
    (Before: 60 KB of "ab." took 80 s; linear, it takes about 15 ms. The bound is 100x that.)"""
    started = time.perf_counter()
    assert redact_text(text) == text
    assert time.perf_counter() - started < 1.5


def _b32_in_stream(prefix: str, value: str, suffix: str) -> str:
    return base64.b32encode(f"{prefix}{value}{suffix}".encode()).decode()


def _xxd(data: bytes) -> str:
    """What `xxd` prints: offset, eight groups of two bytes, then the text column."""
    lines = []
    for at in range(0, len(data), 16):
        chunk = data[at : at + 16]
        groups = " ".join(chunk[i : i + 2].hex() for i in range(0, len(chunk), 2))
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{at:08x}: {groups:<39}  {text}")
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("name", "encode"),
    [
        ("base32", lambda v: base64.b32encode(v.encode()).decode()),
        ("base32, 1 byte before", lambda v: _b32_in_stream("K", v, "\n")),
        ("base32, 3 bytes before", lambda v: _b32_in_stream("KEY", v, "\nA=b")),
        ("base32, 4 bytes before", lambda v: _b32_in_stream("KEY=", v, "\n")),
        ("base32 wrapped at 8 columns", lambda v: _fold(base64.b32encode(v.encode()).decode(), 8)),
        (
            "base64 wrapped (base64 -w 12)",
            lambda v: _fold(base64.b64encode(v.encode()).decode(), 12),
        ),
        ("hex wrapped (xxd -p -c 6)", lambda v: _fold(v.encode().hex(), 12)),
        ("split (fold -w6)", lambda v: _fold(v, 6)),
        ("spaced (sed 's/./& /g')", lambda v: " ".join(v)),
        ("xxd dump", lambda v: _xxd(f"KEY={v}\n".encode())),
    ],
)
def test_registered_values_are_caught_in_issue_32_encodings(name: str, encode: object) -> None:
    """base32 at every alignment, xxd's dump, and the value spread over whitespace."""
    register_secret(SECRET)
    encoded = encode(SECRET)  # type: ignore[operator]
    out = redact_text(f"output:\n{encoded}\nend")
    assert REDACTED in out, name
    compact = "".join(out.split())
    assert SECRET not in compact and SECRET.encode().hex() not in compact, (name, out)
    assert base64.b32encode(SECRET.encode()).decode()[8:-8] not in compact, (name, out)


def _fold(text: str, width: int) -> str:
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


@pytest.mark.parametrize(
    ("text", "leak"),
    [
        ("postgres://hermes:Pg-Pass-9x@db.internal:5432/app", "Pg-Pass-9x"),
        ("DATABASE_URL=postgresql+asyncpg://u:s3cr3t%40x@127.0.0.1/db", "s3cr3t%40x"),
        ("https://ghp0token0abcdefghijklmnop@github.com/x/y.git", "ghp0token0abcdefghijklmnop"),
        ("machine api.example.com login ada password hunter2", "hunter2"),
        ("machine h\n  login ada\n  password hunter2\n", "hunter2"),
        ("db.example.com:5432:app:ada:Pgp4ss!word", "Pgp4ss!word"),
        ("*:*:*:postgres:supersecret", "supersecret"),
        ("<password>Xml-Pass-1</password>", "Xml-Pass-1"),
        ("<db:apiKey type='x'>Xml-Key-2</db:apiKey>", "Xml-Key-2"),
        ('<add key="DbPassword" value="Cfg-Pass-3"/>', "Cfg-Pass-3"),
        ("[database]\npassword = Ini-Pass-4\n", "Ini-Pass-4"),
        ("mysql -u root -pMy-Pass-5 app", "My-Pass-5"),
        ("mysqldump --password=My-Pass-6 app", "My-Pass-6"),
        ("psql --password Pg-Pass-7", "Pg-Pass-7"),
        ("curl -u admin:Curl-Pass-8 https://x.example", "Curl-Pass-8"),
        ("curl --user 'admin:Curl-Pass-9' https://x.example", "Curl-Pass-9"),
        ("sshpass -p Ssh-Pass-10 ssh host", "Ssh-Pass-10"),
        (
            "https://hooks.slack.com/services/T000AAAA/B000BBBB/XXXXXXXXXXXXXXXXXXXXXXXX",
            "XXXXXXXXXXXXXXXXXXXXXXXX",
        ),
        ("https://discord.com/api/webhooks/123456789/AbCdEf-GhIjKl_0123456789", "AbCdEf-GhIjKl"),
        ("https://acme.webhook.office.com/webhookb2/abc-def@1/IncomingWebhook/99/88", "abc-def"),
        ("https://hooks.zapier.com/hooks/catch/123456/abcdef/", "abcdef"),
        ("sk_live_" + "51H8aBcDeFgHiJkLmNoPq", "51H8aBcDeFgHiJkLmNoPq"),
        ("rk_test_" + "4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
        ("whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
        ("glpat-" + "xYz12AbC34dEf56GhI78", "xYz12AbC34dEf56GhI78"),
        ("npm_" + "a" * 18 + "B" * 18, "a" * 18 + "B" * 18),
        ("hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEf", "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEf"),
        ("SG." + "a" * 22 + "." + "b" * 43, "a" * 22),
        ("hvs." + "CAESIJ" + "x" * 20, "CAESIJ"),
        ("ya29." + "a0AfH6SMB" + "z" * 20, "a0AfH6SMB"),
    ],
)
def test_issue_32_shapes_are_caught_without_registration(text: str, leak: str) -> None:
    """Credentials the redactor did not know the shape of (issue 32) are redacted by shape."""
    out = redact_text(text)
    assert leak not in out and REDACTED in out, out


@pytest.mark.parametrize(
    "text",
    [
        "https://example.com/path?q=1 and git@github.com:x/y.git",
        "mkdir -p build/out && ps aux",
        "root:x:0:0:root:/root:/bin/bash",
        "password reset links expire after 24 hours",
        "https://hooks.example.com/not-a-webhook",
        "PWD=/home/ada/project",
        "sk_live is the prefix of a live key",
    ],
)
def test_issue_32_shapes_leave_ordinary_text_alone(text: str) -> None:
    """URLs without credentials, `-p` for mkdir, /etc/passwd lines and prose stay as they are."""
    assert redact_text(text) == text


def test_url_passwords_are_found_for_registration() -> None:
    """Start-up registers the password of every URL with credentials (DATABASE_URL), so its
    encodings are caught too."""
    url = "postgresql+asyncpg://hermes:Db-Secret-Value-77@127.0.0.1:5432/hermes"
    assert url_passwords(f"x {url} y") == ["Db-Secret-Value-77"]
    register_secret(url_passwords(url)[0])
    encoded = base64.b32encode(b"Db-Secret-Value-77").decode()
    assert "Db-Secret" not in redact_text(encoded) and REDACTED in redact_text(encoded)

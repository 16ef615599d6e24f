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
)

SECRET = "plain-Words-secret-42"
"""Registered; shaped like nothing, so only the registry can catch it."""


@pytest.fixture(autouse=True)
def _fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with an empty registry and leaves none behind."""
    monkeypatch.setattr(redaction, "_secrets", frozenset())
    monkeypatch.setattr(redaction, "_secrets_re", None)
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
    ["r" * 60_000, "ab." * 20_000, ("x" * 30 + ".") * 2_000, "a.b-c_" * 10_000, "=" * 60_000],
)
def test_redaction_stays_linear_on_long_runs(text: str) -> None:
    """Tool output is often long and repetitive: no pattern may rescan a run from every position.
    (Before: 60 KB of "ab." took 80 s; linear, it takes about 15 ms. The bound is 100x that.)"""
    started = time.perf_counter()
    assert redact_text(text) == text
    assert time.perf_counter() - started < 1.5

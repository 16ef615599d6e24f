"""Standing-instruction detection: what it catches, and what it leaves alone on purpose."""

from __future__ import annotations

import pytest

from agent.ledger.detect import MAX_PER_MESSAGE, detect_directives


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (
            "Change `backoff_delay` in src/net/retry.py; use the existing retry helper, "
            "don't add a new one. Ticket HRM-1042.",
            ["use the existing retry helper, don't add a new one"],
        ),
        ("Fix it; log counts, never request bodies.", ["log counts, never request bodies"]),
        ("Fix it; no new dependencies.", ["no new dependencies"]),
        (
            "From now on, always answer in British English.",
            ["From now on, always answer in British English"],
        ),
        ("Please never push to main. Thanks!", ["Please never push to main"]),
        ("Use pytest, not unittest.", ["Use pytest, not unittest"]),
        ("Prefer composition over inheritance", ["Prefer composition over inheritance"]),
        ("You should always run the linter first.", ["You should always run the linter first"]),
        ("Don’t add type: ignore comments.", ["Don’t add type: ignore comments"]),
        ("stop the server; stop adding comments everywhere", ["stop adding comments everywhere"]),
        (
            "Rules:\n- always run the linter\n- never commit secrets",
            ["always run the linter", "never commit secrets"],
        ),
    ],
)
def test_catches_standing_instructions_verbatim(text: str, found: list[str]) -> None:
    """Directive markers and imperative contrasts are caught and kept in the user's words."""
    assert detect_directives(text) == found


@pytest.mark.parametrize(
    "text",
    [
        "Change `x` in src/a.py; keep the public API unchanged.",  # no marker: /pin it
        "Should we never retry?",
        "Don't worry about it.",
        "Never mind, it works.",
        "It never works, not sure why.",
        "Tests pass, not flaky any more.",
        "Always the same error.",
        "Don't touch the tests this time.",
        "For now, never retry.",
        "Never merge it yet",
        "I don't like it",
        "never again",
        "```\nnever do this\n```",
        "    always indented code",
        "> never quote me",
        "CI failed:\n\nsrc/a.py::test_never PASSED [3 ms]\nE   AssertionError: never",
        "x = never_call(); always = 1;",
        "",
        "🙂 " * 50,
        "always " + "very " * 80 + "long",
    ],
)
def test_leaves_alone_what_is_not_a_standing_instruction(text: str) -> None:
    """Questions, idioms, one-off scopes, statements, code, logs and quotes are not caught."""
    assert detect_directives(text) == []


def test_repeats_inside_one_message_count_once_and_the_count_is_capped() -> None:
    """The same instruction twice is one entry; a message yields at most MAX_PER_MESSAGE."""
    assert detect_directives("Never push to main. never push to main!") == ["Never push to main"]
    many = "\n".join(f"- never touch module{n}.py" for n in range(30))
    assert len(detect_directives(many)) == MAX_PER_MESSAGE


def test_a_huge_message_is_read_only_at_its_start() -> None:
    """A paste of megabytes costs a bounded scan; an instruction at its start is still found."""
    text = "Always keep the changelog current.\n" + "log line\n" * 500_000 + "never read this"
    assert detect_directives(text) == ["Always keep the changelog current"]

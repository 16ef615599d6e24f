"""Pure query handling of search: user text becomes quoted terms, never syntax."""

from __future__ import annotations

import pytest

from state.search import MAX_TERMS, fts5_expression, query_terms, tsquery_text


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("", []),
        ('"', []),
        ("*", []),
        ("NEAR(", ["near"]),
        ("'; DROP TABLE messages; --", ["drop", "table", "messages"]),
        ("🦊🦊", []),
        ("Fox fox FOX", ["fox"]),
        ("wörld café", ["wörld", "café"]),
        ("a.txt", ["a", "txt"]),
        ("x" * 10_000, ["x" * 64]),
        (" ".join(f"w{i}" for i in range(100)), [f"w{i}" for i in range(MAX_TERMS)]),
    ],
    ids=[
        "empty",
        "quote",
        "star",
        "near",
        "sql",
        "emoji",
        "case",
        "accents",
        "dotted",
        "10kb",
        "many",
    ],
)
def test_query_terms_keeps_only_words(query: str, terms: list[str]) -> None:
    """Operators and punctuation vanish; words are lowered, deduplicated and capped."""
    assert query_terms(query) == terms


@pytest.mark.parametrize(
    ("terms", "any_term", "expr"),
    [
        (["fox"], False, '"fox"'),
        (["fox", "near"], False, '"fox" AND "near"'),
        (["fox", "near"], True, '"fox" OR "near"'),
        (['a"b'], False, '"a""b"'),
    ],
)
def test_fts5_expression_quotes_every_term(terms: list[str], any_term: bool, expr: str) -> None:
    """Each term is an FTS5 string, so no term can be read as an operator."""
    assert fts5_expression(terms, any_term=any_term) == expr


@pytest.mark.parametrize(
    ("terms", "any_term", "expr"),
    [(["fox", "dog"], False, "fox dog"), (["fox", "dog"], True, "fox or dog")],
)
def test_tsquery_text_joins_terms(terms: list[str], any_term: bool, expr: str) -> None:
    """PostgreSQL gets the same terms, all required or any of them."""
    assert tsquery_text(terms, any_term=any_term) == expr

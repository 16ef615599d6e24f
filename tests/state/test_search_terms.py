"""Pure query handling of search: user text becomes quoted phrases, never syntax.

The contract tested: FTS5's query syntax (https://www.sqlite.org/fts5.html, section 3: a
string in double quotes, `""` for a quote inside it, is a phrase; the tokenizer splits it as
it split the documents) and `websearch_to_tsquery` (PostgreSQL, "Parsing Queries": text in
double quotes becomes a phrase, `<->`; it never raises a syntax error). The FTS5 side is run
through a real FTS5 table of the SQLite the store uses.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from state.search import (
    MAX_PHRASE_WORDS,
    MAX_TERM_CHARS,
    MAX_TERMS,
    Syntax,
    Term,
    match_expression,
    match_queries,
    query_terms,
)


def _t(text: str, *words: str) -> Term:
    return Term(words=words or (text,), text=text)


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("", []),
        ('"', []),
        ("*", []),
        ("NEAR(", [_t("near(", "near")]),
        ("'; DROP TABLE messages; --", [_t("drop"), _t("table"), _t("messages;", "messages")]),
        ("🦊🦊", []),
        ("Fox fox FOX", [_t("fox")]),
        ("wörld café", [_t("wörld"), _t("café")]),
        ("a.txt", [_t("a.txt", "a", "txt")]),
        ("(HRM-1154).", [_t("(hrm-1154).", "hrm", "1154")]),
        ("test_case_154", [_t("test_case_154", "test", "case", "154")]),
        ('say "HRM-1154"', [_t("say"), _t(" hrm-1154 ", "hrm", "1154")]),
        ('a"b a\\b a\x00b "a-b"', [_t("a b", "a", "b"), _t(" a-b ", "a", "b")]),
        ("col:zephyr", [_t("col:zephyr", "col", "zephyr")]),
        ("x" * 10_000, [_t("x" * MAX_TERM_CHARS)]),
        (" ".join(f"w{i}" for i in range(100)), [_t(f"w{i}") for i in range(MAX_TERMS)]),
        (
            "-".join(f"w{i}" for i in range(100)),
            [_t("-".join(f"w{i}" for i in range(16)) + "-", *(f"w{i}" for i in range(16)))],
        ),
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
        "tag",
        "underscores",
        "quoted-tag",
        "unsafe-joints",
        "column-filter",
        "10kb",
        "many",
        "long-phrase",
    ],
)
def test_query_terms_keep_words_with_their_joints(query: str, terms: list[Term]) -> None:
    """Pieces between whitespace are terms: their words (lowered, capped) and the piece's text
    (what the engines tokenize), in which quotes, backslashes and NUL become spaces."""
    assert MAX_PHRASE_WORDS == 16
    assert query_terms(query) == terms


@pytest.mark.parametrize(
    ("terms", "syntax", "any_term", "expr"),
    [
        ([_t("fox")], "fts5", False, '"fox"'),
        ([_t("hrm-1154", "hrm", "1154"), _t("near")], "fts5", False, '"hrm-1154" AND "near"'),
        ([_t("fox"), _t("near")], "fts5", True, '"fox" OR "near"'),
        ([_t('a"b')], "fts5", False, '"a""b"'),
        ([_t("hrm-1154", "hrm", "1154"), _t("dog")], "tsquery", False, '"hrm-1154" "dog"'),
        ([_t("fox"), _t("dog")], "tsquery", True, '"fox" or "dog"'),
        ([_t('a"b\\c')], "tsquery", False, '"a b c"'),
    ],
)
def test_match_expression_quotes_every_term(
    terms: list[Term], syntax: Syntax, any_term: bool, expr: str
) -> None:
    """Each term is a quoted phrase, so no term can be read as an operator."""
    assert match_expression(terms, syntax, any_term=any_term) == expr


@pytest.mark.parametrize(
    ("query", "syntax", "tries"),
    [
        ("", "fts5", []),
        ("fox", "fts5", ['"fox"']),
        ("HRM-1154", "fts5", ['"hrm-1154"', '"hrm" OR "1154"']),
        ("HRM-1154", "tsquery", ['"hrm-1154"', '"hrm" or "1154"']),
        ("fox dog", "fts5", ['"fox" AND "dog"', '"fox" OR "dog"']),
        (
            "fix HRM-1154",
            "tsquery",
            ['"fix" "hrm-1154"', '"fix" or "hrm-1154"', '"fix" or "hrm" or "1154"'],
        ),
        ("a-b a b", "fts5", ['"a-b" AND "a" AND "b"', '"a-b" OR "a" OR "b"']),
    ],
)
def test_match_queries_go_from_every_phrase_to_any_word(
    query: str, syntax: Syntax, tries: list[str]
) -> None:
    """All terms first, then any term, then any single word (only when that adds a word)."""
    assert match_queries(query, syntax) == tries


_STRING = r'"(?:[^"]|"")*"'
_ALL = re.compile(rf"{_STRING}(?: AND {_STRING})*")
_ANY = re.compile(rf"{_STRING}(?: OR {_STRING})*")
_HOSTILE_PIECES = st.sampled_from(
    [
        "AND",
        "OR",
        "NOT",
        "NEAR",
        "NEAR(",
        "*",
        "^",
        "+",
        "-",
        "col:",
        "content:",
        "{content}:",
        "(",
        ")",
        '"',
        '""',
        "\\",
        "\x00",
        "\ud800",
        "HRM-1154",
        "[1154 ms]",
        "é",
        "e\u0301",
        "İ",
        "\ue000",
        "٣",
        "…",
        " ",
        "\t",
        "_",
    ]
)
QUERIES = st.one_of(
    st.text(max_size=60),
    st.lists(st.one_of(_HOSTILE_PIECES, st.text(max_size=6)), max_size=12).map("".join),
)


@pytest.fixture(scope="module")
def fts5() -> Iterator[sqlite3.Connection]:
    """An FTS5 table tokenized as the store's `messages_fts` (`state.models.SEARCH_DDL_SQLITE`)."""
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(content, tokenize='unicode61 remove_diacritics 2')"
    )
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
    yield conn
    conn.close()


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=QUERIES)
def test_any_text_is_a_valid_fts5_query_of_quoted_strings(
    fts5: sqlite3.Connection, query: str
) -> None:
    """Every expression parses in a real FTS5 table and is only quoted strings joined by one
    operator (AND for the first try, OR for the fallbacks): no operator, column filter,
    prefix or NEAR of the user's survives as syntax."""
    tries = match_queries(query, "fts5")
    assert bool(tries) == bool(query_terms(query))
    for n, expr in enumerate(tries):
        assert (_ALL if n == 0 else _ANY).fullmatch(expr), expr
        fts5.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,)).fetchall()


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=QUERIES)
def test_a_message_holding_the_query_is_found_by_it(fts5: sqlite3.Connection, query: str) -> None:
    """The query's own text, stored, is found by the first try that finds anything (when it
    has a word and FTS5 indexed one), so quoting never loses what the words name. Words longer
    than MAX_TERM_CHARS are cut, so they are left out here."""
    assume(all(len(w) <= MAX_TERM_CHARS for w in re.findall(r"[^\W_]+", query)))
    assume("\x00" not in query and not re.search("[\ud800-\udfff]", query))
    with fts5:
        fts5.execute("DELETE FROM t")
        fts5.execute("INSERT INTO t(rowid, content) VALUES (1, ?)", (query,))
        indexed = fts5.execute("SELECT count(*) FROM v").fetchone()[0]
        found: list[tuple[int]] = []
        for expr in match_queries(query, "fts5"):
            found = fts5.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,)).fetchall()
            if found:
                break
        if indexed and query_terms(query) and len(query.split()) <= MAX_TERMS:
            assert found == [(1,)], (query, match_queries(query, "fts5"))
        fts5.execute("DELETE FROM t")

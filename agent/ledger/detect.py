"""Find standing instructions in what the user typed: deterministic and deliberately conservative.

A clause counts when, after a lead-in such as "please", "from now on," or "you should", it
starts with a directive word (always, never, don't, do not, no new, no more, stop, avoid,
prefer, only use), or when it reads as an imperative (it does not start like a statement or a
question: "I", "it", "the", "what", ...) and contrasts with ", not", ", never", ", don't",
"instead of" or "rather than" ("use X, not Y"; "log counts, never request bodies").

Left out on purpose: questions; one-off scopes ("this time", "for now", "today", "yet");
idioms ("don't worry", "never mind"); code, logs and quotes (fenced blocks, indented or quoted
lines, lines that look like output); clauses under three words or over 240 characters; and
instructions without a marker ("keep the public API unchanged"), which `/pin` is for. The
clause is kept exactly as the user wrote it.
"""

from __future__ import annotations

import re

__all__ = ["MAX_DIRECTIVE_CHARS", "MAX_PER_MESSAGE", "detect_directives"]

MAX_PER_MESSAGE = 8
MAX_DIRECTIVE_CHARS = 240
MAX_SCANNED_CHARS = 20_000
"""Only the start of a very long message is read (a paste rarely carries new rules)."""

_LEAD_INS = (
    "please",
    "actually",
    "instead",
    "correction",
    "new rule",
    "scratch that",
    "and",
    "also",
    "but",
    "so",
    "ok",
    "okay",
    "from now on",
    "going forward",
    "in future",
    "in the future",
    "as a rule",
    "remember",
    "remember to",
    "note",
    "rule",
    "important",
    "you should",
    "you must",
    "we should",
    "we must",
    "make sure to",
    "make sure you",
)
_LEAD_RE = re.compile(
    r"^(?:(?:" + "|".join(re.escape(w) for w in sorted(_LEAD_INS, key=len, reverse=True)) + r")"
    r"\b[\s,:;!-]*)+",
    re.I,
)
_HEAD_RE = re.compile(
    r"^(?:always|never|don'?t|do not|no new|no more|stop|avoid|prefer|only use)\b", re.I
)
_CONTRAST_RE = re.compile(r",\s*(?:not|never|don'?t|do not)\b|\b(?:instead of|rather than)\b", re.I)
_EXCLUDED_RE = re.compile(
    r"\b(?:don'?t (?:worry|bother|know|think|forget|mind)|do not (?:worry|know)|never mind"
    r"|this time|for now|right now|today|tonight|just once|yet)\b",
    re.I,
)
_STATEMENT_STARTS = frozenset(
    (
        "i i'm i've i'd i'll we we're we've you you're it it's its this that these those there "
        "here he she they the a an my our your his her their what why how when where who which "
        "is are was were does did can could should would will if because maybe perhaps thanks "
        "thank sorry ok okay yes yeah yep nope no not let let's lets just well hmm great nice "
        "cool looks seems sounds fine"
    ).split()
)
_BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+")
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=\S)")
_CODEISH_RE = re.compile(r"::|Traceback|File \"|[{}]|\(\)|;\s*$|^\$ |^E\s{2,}|=>|==|\w=\S")


def detect_directives(text: str) -> list[str]:
    """The standing instructions in one user message, verbatim, in order, without repeats."""
    found: list[str] = []
    for line in _prose_lines(text[:MAX_SCANNED_CHARS]):
        for sentence in _SENTENCE_RE.split(line):
            if sentence.rstrip().endswith("?"):
                continue
            for clause in sentence.split(";"):
                directive = _directive(clause)
                if directive and directive.casefold() not in {f.casefold() for f in found}:
                    found.append(directive)
                    if len(found) == MAX_PER_MESSAGE:
                        return found
    return found


def _prose_lines(text: str) -> list[str]:
    """Lines a person wrote, bullets unwrapped; code fences, indented, quoted and log-like
    lines are skipped."""
    lines: list[str] = []
    fenced = False
    for raw in text.replace("\r\n", "\n").split("\n"):
        if raw.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or raw.startswith(("    ", "\t")) or raw.lstrip().startswith(">"):
            continue
        line = _BULLET_RE.sub("", raw).strip()
        if line and not _CODEISH_RE.search(line) and _letters_share(line) >= 0.6:
            lines.append(line)
    return lines


def _directive(clause: str) -> str | None:
    text = clause.strip().rstrip(".,!:").strip().strip("\"'“”").strip()
    if not 3 <= len(text.split()) or len(text) > MAX_DIRECTIVE_CHARS:
        return None
    if _EXCLUDED_RE.search(text):
        return None
    body = _LEAD_RE.sub("", text.replace("’", "'"))
    head = _HEAD_RE.match(body)
    if head is not None:
        return text if _head_fits(head.group(0).lower(), _word_at(body, head.end())) else None
    if _is_verbish(_word_at(body, 0)) and _CONTRAST_RE.search(body):
        return text
    return None


def _head_fits(marker: str, following: str) -> bool:
    """ "stop" needs a gerund ("stop adding"), so "stop the server" (a one-off) is no rule;
    always / never / don't need something that can be a verb ("always use", not "always the")."""
    match marker:
        case "stop":
            return following.endswith("ing")
        case "no new" | "no more" | "avoid" | "prefer" | "only use":
            return bool(following)
        case _:
            return _is_verbish(following)


def _is_verbish(word: str) -> bool:
    """Could start an instruction: a word, not a statement's opening, not past or -ing, not a
    third-person "-s" form ("tests pass, not flaky" reads as a statement)."""
    if not word.isalpha() or word in _STATEMENT_STARTS or word.endswith(("ed", "ing")):
        return False
    return not (word.endswith("s") and not word.endswith(("ss", "us", "is")))


def _word_at(text: str, start: int) -> str:
    rest = text[start:].split(maxsplit=1)
    return rest[0].lower().strip("\"'`(,.;:") if rest else ""


def _letters_share(line: str) -> float:
    letters = sum(ch.isalpha() or ch.isspace() for ch in line)
    return letters / max(1, len(line))

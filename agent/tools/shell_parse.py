"""Parse a bash command line with tree-sitter-bash into the simple commands it would run.

`parse_script` walks the syntax tree and returns every simple command in source order (those
inside `$(…)`, `<(…)`, backticks, functions, loops and subshells included), each with its words
after quote removal and brace expansion, its assignments, its redirections and whether its
standard input is a pipe or inline text (here-document, here-string). A word whose value depends
on an expansion (`$x`, `$(…)`, `${…}`) has `value=None`: the policy cannot know it. Text that does
not parse as bash is reported as a problem rather than guessed at.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

__all__ = ["ParsedScript", "Redirect", "SimpleCommand", "Word", "expand_braces", "parse_script"]

MAX_BRACE_WORDS = 256
"""A brace expansion that would yield more words than this is treated as unknown."""
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution"})
_ESCAPE_IN_DOUBLE = re.compile(r"\\([\\\"$`\n])")
_ANSI_C = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b",
                   "E": "\x1b", "f": "\f", "v": "\v"}  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Word:
    """One word of a command: as written, and its value when no expansion is involved."""

    text: str
    value: str | None
    quoted: bool = False
    """Some of it was quoted, so glob characters in it are literal."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Redirect:
    """`>`, `>>`, `<`, `&>`, `<<`, `<<<` and friends, with the file they name."""

    op: str
    target: Word | None
    """None for a here-document."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SimpleCommand:
    """A command the shell would run: `words[0]` is its name (absent for bare assignments)."""

    words: tuple[Word, ...]
    assignments: tuple[tuple[str, Word], ...] = ()
    redirects: tuple[Redirect, ...] = ()
    piped_in: bool = False
    """Its standard input is the output of another command."""
    inline_input: bool = False
    """Its standard input is a here-document or here-string."""
    text: str = ""
    """The command as written, for messages."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedScript:
    commands: tuple[SimpleCommand, ...]
    group_redirects: tuple[Redirect, ...] = ()
    """Redirections of `{ …; }`, loops and subshells, which apply to several commands."""
    problems: tuple[str, ...] = ()
    """Constructs the policy cannot see through: parse errors, recursive functions."""
    functions: frozenset[str] = frozenset()
    """Names the script defines as functions (calls to them run their visible bodies)."""


@dataclass(slots=True)
class _Context:
    env: Mapping[str, str]
    piped_in: bool = False
    inline_input: bool = False
    redirects: tuple[Redirect, ...] = ()


@dataclass(slots=True)
class _Collected:
    commands: list[SimpleCommand] = field(default_factory=list)
    group_redirects: list[Redirect] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    functions: set[str] = field(default_factory=set)


def parse_script(command: str, *, env: Mapping[str, str]) -> ParsedScript:
    """Every simple command in `command`; `env` holds the few variables known for sure (HOME)."""
    tree = _parser().parse(command.encode("utf-8", errors="surrogateescape"))
    out = _Collected()
    if tree.root_node.has_error:
        out.problems.append("it does not parse as shell (unbalanced quotes or brackets?)")
    _walk(tree.root_node, _Context(env=env), out)
    return ParsedScript(
        commands=tuple(out.commands),
        group_redirects=tuple(out.group_redirects),
        problems=tuple(out.problems),
        functions=frozenset(out.functions),
    )


def expand_braces(text: str) -> list[str] | None:
    """Bash brace expansion of an unquoted word (`a{b,c}` -> ab ac, `{1..3}`); None if huge."""
    match = _innermost_brace(text)
    if match is None:
        return [text]
    start, end, options = match
    results: list[str] = []
    for option in options:
        expanded = expand_braces(text[:start] + option + text[end:])
        if expanded is None or len(results) + len(expanded) > MAX_BRACE_WORDS:
            return None
        results.extend(expanded)
    return results


# ---------------------------------------------------------------------------------------------


@cache
def _parser() -> Parser:
    import tree_sitter_bash  # tree-sitter loads when the first command is parsed, not at start-up
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


def _walk(node: Node, ctx: _Context, out: _Collected) -> None:
    match node.type:
        case "command":
            out.commands.append(_command(node, ctx))
            _walk_nested(node, ctx, out)
        case "pipeline":
            piped = ctx.piped_in
            for child in node.children:
                if child.type in ("|", "|&"):
                    piped = True
                elif child.is_named:
                    _walk(child, replace(ctx, piped_in=piped), out)
        case "redirected_statement":
            _redirected(node, ctx, out)
        case "function_definition":
            _function(node, ctx, out)
        case "variable_assignment":
            name, word = _assignment(node, ctx)
            out.commands.append(
                SimpleCommand(words=(), assignments=((name, word),), text=_text(node))
            )
            _walk_nested(node, ctx, out)
        case "declaration_command":
            _declaration(node, ctx, out)
        case "ERROR":
            if "it does not parse as shell (unbalanced quotes or brackets?)" not in out.problems:
                out.problems.append("it does not parse as shell")
            _walk_children(node, ctx, out)
        case "comment":
            return
        case _:
            _walk_children(node, ctx, out)


def _walk_children(node: Node, ctx: _Context, out: _Collected) -> None:
    for child in node.children:
        _walk(child, ctx, out)


def _walk_nested(node: Node, ctx: _Context, out: _Collected) -> None:
    """Commands inside substitutions of `node` run on their own input, not the pipe's."""
    inner = _Context(env=ctx.env)
    for sub in _descendants(node, _SUBSTITUTIONS):
        _walk_children(sub, inner, out)
    for child in node.children:
        if child.type in _REDIRECTS:
            _walk_redirect(child, ctx, out)


def _walk_redirect(node: Node, ctx: _Context, out: _Collected) -> None:
    """Substitutions in a redirection's target, and the pipe a here-document continues into."""
    inner = _Context(env=ctx.env)
    for sub in _descendants(node, _SUBSTITUTIONS):
        _walk_children(sub, inner, out)
    for part in node.children:
        if part.type == "pipeline":  # `cat <<EOF | bash`: the pipe continues here
            _walk(part, replace(inner, piped_in=True), out)


def _descendants(node: Node, types: frozenset[str]) -> Iterator[Node]:
    """The outermost descendants of `node` whose type is in `types`."""
    for child in node.children:
        if child.type in types:
            yield child
        elif child.type not in _REDIRECTS and child.type != "pipeline":
            yield from _descendants(child, types)


def _redirected(node: Node, ctx: _Context, out: _Collected) -> None:
    redirects = tuple(_redirect(c, ctx) for c in node.children if c.type in _REDIRECTS)
    inline = any(_feeds_text(r) for r in redirects)
    body = next((c for c in node.children if c.is_named and c.type not in _REDIRECTS), None)
    inner = replace(ctx, inline_input=ctx.inline_input or inline)
    if body is not None and body.type == "command":
        _walk(body, replace(inner, redirects=ctx.redirects + redirects), out)
    else:
        out.group_redirects.extend(redirects)
        if body is not None:
            _walk(body, inner, out)
    for child in node.children:
        if child.type in _REDIRECTS:
            _walk_redirect(child, ctx, out)


def _function(node: Node, ctx: _Context, out: _Collected) -> None:
    name_node = node.child_by_field_name("name") or next(
        (c for c in node.children if c.type == "word"), None
    )
    name = _text(name_node) if name_node is not None else ""
    before = len(out.commands)
    out.functions.add(name)
    for child in node.children:
        if child.is_named and child is not name_node:
            _walk(child, _Context(env=ctx.env), out)
    called = {c.words[0].value for c in out.commands[before:] if c.words}
    if name in called:
        out.problems.append(f"the function {name!r} calls itself (a fork bomb?)")


def _declaration(node: Node, ctx: _Context, out: _Collected) -> None:
    words: list[Word] = []
    assignments: list[tuple[str, Word]] = []
    for child in node.children:
        if child.type == "variable_assignment":
            assignments.append(_assignment(child, ctx))
        elif child.type in ("export", "declare", "local", "readonly", "typeset"):
            words.append(Word(text=child.type, value=child.type))
        elif child.is_named:
            words.extend(_words(child, ctx))
    out.commands.append(
        SimpleCommand(words=tuple(words), assignments=tuple(assignments), text=_text(node))
    )
    _walk_nested(node, ctx, out)


def _command(node: Node, ctx: _Context) -> SimpleCommand:
    words: list[Word] = []
    assignments: list[tuple[str, Word]] = []
    redirects = list(ctx.redirects)
    inline = ctx.inline_input
    for child in node.children:
        if child.type == "variable_assignment":
            assignments.append(_assignment(child, ctx))
        elif child.type in _REDIRECTS:
            redirect = _redirect(child, ctx)
            redirects.append(redirect)
            inline = inline or _feeds_text(redirect)
        elif child.type == "command_name":
            for part in child.children:
                words.extend(_words(part, ctx))
        elif child.is_named and child.type != "comment":
            words.extend(_words(child, ctx))
    return SimpleCommand(
        words=tuple(words),
        assignments=tuple(assignments),
        redirects=tuple(redirects),
        piped_in=ctx.piped_in,
        inline_input=inline,
        text=_text(node),
    )


def _feeds_text(redirect: Redirect) -> bool:
    """Standard input is inline text, or a file the policy cannot name (`< <(…)`)."""
    if redirect.op in ("<<", "<<-", "<<<"):
        return True
    return redirect.op == "<" and (redirect.target is None or redirect.target.value is None)


def _assignment(node: Node, ctx: _Context) -> tuple[str, Word]:
    name_node = node.child_by_field_name("name") or node.children[0]
    value_node = node.child_by_field_name("value")
    if value_node is None:
        return _text(name_node), Word(text="", value="")
    return _text(name_node), _word(value_node, ctx)


def _redirect(node: Node, ctx: _Context) -> Redirect:
    op = next((c.type for c in node.children if not c.is_named), "")
    if node.type == "heredoc_redirect":
        return Redirect(op="<<", target=None)
    target = node.child_by_field_name("destination")
    if target is None:
        named = [c for c in node.children if c.is_named and c.type != "file_descriptor"]
        target = named[-1] if named else None
    return Redirect(op=op, target=_word(target, ctx) if target is not None else None)


def _words(node: Node, ctx: _Context) -> list[Word]:
    word = _word(node, ctx)
    if word.value is None or word.quoted or "{" not in word.value:
        return [word]
    expanded = expand_braces(word.value)
    if expanded is None:
        return [Word(text=word.text, value=None)]
    return [Word(text=word.text, value=v) for v in expanded]


def _word(node: Node, ctx: _Context) -> Word:
    value, quoted = _value(node, ctx.env)
    return Word(text=_text(node), value=value, quoted=quoted)


def _value(node: Node, env: Mapping[str, str]) -> tuple[str | None, bool]:
    """The word's value after quote removal, and whether any of it was quoted."""
    text = _text(node)
    match node.type:
        case "word":
            unescaped = re.sub(r"\\\n", "", text)
            unescaped = re.sub(r"\\(.)", r"\1", unescaped, flags=re.S)
            return _tilde(unescaped, env), "\\" in text
        case "number" | "test_operator" | "variable_name" | "brace_expression":
            return text, False
        case "raw_string":
            return text[1:-1], True
        case "ansi_c_string":
            return _ansi_c(text[2:-1]), True
        case "string" | "translated_string":
            return _double_quoted(node, env), True
        case "concatenation":
            parts = [_value(child, env) for child in node.children]
            if any(v is None for v, _ in parts):
                return None, any(q for _, q in parts)
            return "".join(v for v, _ in parts if v is not None), any(q for _, q in parts)
        case "simple_expansion" | "expansion":
            return _known_variable(node, env), False
        case _:
            return None, False


def _double_quoted(node: Node, env: Mapping[str, str]) -> str | None:
    pieces: list[str] = []
    for child in node.children:
        if child.type in ('"', '$"'):
            continue
        if child.type == "string_content":
            pieces.append(
                _ESCAPE_IN_DOUBLE.sub(lambda m: "" if m[1] == "\n" else m[1], _text(child))
            )
        elif child.type == "string":
            inner = _double_quoted(child, env)
            if inner is None:
                return None
            pieces.append(inner)
        else:
            value = _known_variable(child, env) if "expansion" in child.type else None
            if value is None:
                return None
            pieces.append(value)
    return "".join(pieces)


def _known_variable(node: Node, env: Mapping[str, str]) -> str | None:
    """`$HOME` or `${HOME}` when the variable is known; anything fancier is unknown."""
    names = [c for c in node.children if c.type == "variable_name"]
    others = [c for c in node.children if c.is_named and c.type != "variable_name"]
    if len(names) != 1 or others or node.type == "expansion" and node.child_count != 3:
        return None
    return env.get(_text(names[0]))


def _tilde(value: str, env: Mapping[str, str]) -> str:
    home = env.get("HOME")
    if home and (value == "~" or value.startswith("~/")):
        return home + value[1:]
    return value


def _ansi_c(body: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "xuU":
            return chr(int(code[1:], 16))
        if code[0] in "01234567":
            return chr(int(code, 8))
        if code[0] == "c":
            return chr(ord(code[1].upper()) ^ 0x40)
        return _SIMPLE_ESCAPES.get(code, code)

    return _ANSI_C.sub(one, body)


def _innermost_brace(text: str) -> tuple[int, int, list[str]] | None:
    """The first `{…}` without nested braces that bash would expand, and its options."""
    for match in re.finditer(r"\{([^{}]*)\}", text):
        body = match.group(1)
        if "," in body:
            return match.start(), match.end(), body.split(",")
        seq = re.fullmatch(r"(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])", body)
        if seq:
            return match.start(), match.end(), _sequence(seq.group(1), seq.group(2))
    return None


def _sequence(first: str, last: str) -> list[str]:
    if first.lstrip("-").isdigit() and last.lstrip("-").isdigit():
        a, b = int(first), int(last)
        step = 1 if b >= a else -1
        return [str(i) for i in range(a, b + step, step)][: MAX_BRACE_WORDS + 1]
    a, b = ord(first), ord(last)
    step = 1 if b >= a else -1
    return [chr(i) for i in range(a, b + step, step)]


def _text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return codecs.decode(node.text, "utf-8", errors="surrogateescape")

"""What the fake Bot API accepts, as Telegram documents it: parameters, HTML-style text, inline
keyboards and bot commands.

HTML style (https://core.telegram.org/bots/api#html-style): only the tags `b`/`strong`,
`i`/`em`, `u`/`ins`, `s`/`strike`/`del`, `span class="tg-spoiler"`/`tg-spoiler`, `a href`,
`tg-emoji emoji-id`, `code` (with `class="language-…"` inside `pre`), `pre` and `blockquote`
(optionally `expandable`); `<`, `>` and `&` that are not markup must be `&lt;`, `&gt;`, `&amp;`;
the named entities are `&lt;`, `&gt;`, `&amp;`, `&quot;`, and every numeric one; an unknown
named entity is kept as typed. The error texts are the Bot API's own, as reported by bots that
met them ("Bad Request: can't parse entities: Unsupported start tag "p" at byte offset 281",
"... Unmatched end tag at byte offset 354, expected "</i>", found "</code>"", "... Can't find end
tag corresponding to start tag "b""). The message limit (1-4096 characters) applies to the text
after entity parsing (https://core.telegram.org/bots/api#sendmessage).

Bot commands (https://core.telegram.org/bots/api#botcommand): `command` is 1-32 characters of
lowercase English letters, digits and underscores, `description` 1-256 characters; at most 100
commands (https://core.telegram.org/bots/api#setmycommands). A bad command is answered
"Bad Request: BOT_COMMAND_INVALID" and an empty description "Bad Request: command description
must be non-empty" (both seen from the real API); the texts for a too long description or too
many commands are this fake's guess.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = [
    "ParsedText",
    "Refused",
    "command_problem",
    "markup_problem",
    "parse_html",
    "parse_message_text",
    "request_params",
]

_TAGS = {
    "b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline",
    "ins": "underline", "s": "strikethrough", "strike": "strikethrough", "del": "strikethrough",
    "span": "spoiler", "tg-spoiler": "spoiler", "a": "text_link", "tg-emoji": "custom_emoji",
    "code": "code", "pre": "pre", "blockquote": "blockquote",
}  # fmt: skip
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_ENTITY = re.compile(r"&(#[0-9]{1,7}|#x[0-9A-Fa-f]{1,6}|[A-Za-z]{1,10});")
_ATTRIBUTE = re.compile(r'\s*([A-Za-z-]+)(?:\s*=\s*(?:"([^"]*)"|\'([^\']*)\'|([^\s>]+)))?')
_COMMAND = re.compile(r"^[a-z0-9_]{1,32}$")
_STRING_FIELDS = frozenset(
    {
        "text",
        "action",
        "parse_mode",
        "url",
        "secret_token",
        "caption",
        "callback_query_id",
        "language_code",
    }
)
"""Fields PTB sends as raw strings; every other field arrives JSON-encoded."""
PREFIX = "Bad Request: can't parse entities: "


class Refused(ValueError):
    """The Bot API's 400 for what it will not take; `str()` is the full description."""


@dataclass(slots=True)
class ParsedText:
    text: str
    entities: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class _Open:
    name: str
    offset: int
    """Where the entity starts in the parsed text (UTF-16 code units, as Telegram counts)."""
    attributes: dict[str, str]


def parse_html(source: str) -> ParsedText:
    """Telegram's HTML style: the text a user sees and its entities; Refused if refused."""
    out: list[str] = []
    units = 0  # UTF-16 length of `out`
    opened: list[_Open] = []
    entities: list[dict[str, Any]] = []
    i = 0
    while i < len(source):
        char = source[i]
        if (
            char == "&"
            and (match := _ENTITY.match(source, i))
            and (decoded := _decode_entity(match))
        ):
            out.append(decoded)
            units += _utf16(decoded)
            i = match.end()
        elif char == "<" and source.startswith("</", i):
            i = _end_tag(source, i, opened, entities, units)
        elif char == "<":
            tag, i = _start_tag(source, i)
            opened.append(_Open(name=tag[0], offset=units, attributes=tag[1]))
        else:
            out.append(char)
            units += _utf16(char)
            i += 1
    if opened:
        raise Refused(f'{PREFIX}Can\'t find end tag corresponding to start tag "{opened[-1].name}"')
    return ParsedText(text="".join(out), entities=sorted(entities, key=lambda e: e["offset"]))


async def request_params(request: web.Request) -> dict[str, Any]:
    """Query, form or JSON parameters; form fields other than plain strings are JSON-decoded."""
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        params |= await request.json()
        return params
    if request.can_read_body:
        form = await request.post()
        params |= {k: v for k, v in form.items() if isinstance(v, str)}
        # An uploaded file (sendPhoto, sendDocument): its name and bytes.
        params |= {
            k: {"filename": v.filename, "data": v.file.read()}
            for k, v in form.items()
            if isinstance(v, web.FileField)
        }
    return {k: _decode_field(k, v) for k, v in params.items()}


def _decode_field(key: str, value: Any) -> Any:
    if key in _STRING_FIELDS or not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def parse_message_text(raw: str, parse_mode: str | None) -> ParsedText:
    """A message's text as the user will read it; Refused with the Bot API's 400 text."""
    if parse_mode is not None and parse_mode != "HTML":
        raise Refused(f"Bad Request: unsupported parse_mode {parse_mode!r} in this fake")
    parsed = parse_html(raw) if parse_mode == "HTML" else ParsedText(text=raw)
    if not parsed.text.strip():
        raise Refused("Bad Request: message text is empty")
    if len(parsed.text) > 4096:
        raise Refused("Bad Request: message is too long")
    return parsed


def markup_problem(markup: Any) -> str | None:
    """What the Bot API would reject in an InlineKeyboardMarkup, or None."""
    rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        return "can't parse inline keyboard button: InlineKeyboardButton must be an Object"
    for button in (b for row in rows for b in row):
        if not isinstance(button, dict) or not isinstance(button.get("text"), str):
            return "can't parse inline keyboard button: Text must be a String"
        data = button.get("callback_data")
        if data is not None and not 1 <= len(str(data).encode()) <= 64:
            return "BUTTON_DATA_INVALID"
    return None


def command_problem(commands: Any) -> str | None:
    """What setMyCommands would refuse in `commands`, as its error description; None if fine."""
    if not isinstance(commands, list):
        return "Bad Request: can't parse commands JSON object"
    if len(commands) > 100:
        return "Bad Request: too many commands"
    for item in commands:
        if not isinstance(item, dict) or not isinstance(item.get("command"), str):
            return "Bad Request: can't parse BotCommand: Can't find field \"command\""
        if not isinstance(item.get("description"), str):
            return "Bad Request: can't parse BotCommand: Can't find field \"description\""
        if not _COMMAND.match(item["command"]):
            return "Bad Request: BOT_COMMAND_INVALID"
        if not item["description"].strip():
            return "Bad Request: command description must be non-empty"
        if len(item["description"]) > 256:
            return "Bad Request: BOT_COMMAND_DESCRIPTION_INVALID"
    return None


def _start_tag(source: str, start: int) -> tuple[tuple[str, dict[str, str]], int]:
    close = source.find(">", start)
    if close < 0:
        raise Refused(f"{PREFIX}Unclosed start tag at byte offset {_bytes(source, start)}")
    inner = source[start + 1 : close]
    name = re.match(r"[A-Za-z0-9-]*", inner)
    tag = (name.group(0) if name else "").lower()
    if tag not in _TAGS:
        raise Refused(
            f'{PREFIX}Unsupported start tag "{tag}" at byte offset {_bytes(source, start)}'
        )
    attributes = {
        m.group(1).lower(): next((g for g in m.groups()[1:] if g is not None), "")
        for m in _ATTRIBUTE.finditer(inner[len(tag) :])
        if m.group(1)
    }
    if tag == "span" and attributes.get("class") != "tg-spoiler":
        raise Refused(f'{PREFIX}Tag "span" must have class "tg-spoiler" at byte offset '
                          f"{_bytes(source, start)}")  # fmt: skip
    return (tag, attributes), close + 1


def _end_tag(
    source: str, start: int, opened: list[_Open], entities: list[dict[str, Any]], units: int
) -> int:
    close = source.find(">", start)
    if close < 0:
        raise Refused(f"{PREFIX}Unclosed end tag at byte offset {_bytes(source, start)}")
    name = source[start + 2 : close].strip().lower()
    if not opened:
        raise Refused(f"{PREFIX}Unexpected end tag at byte offset {_bytes(source, start)}")
    top = opened.pop()
    if name != top.name:
        raise Refused(
            f"{PREFIX}Unmatched end tag at byte offset {_bytes(source, start)}, expected "
            f'"</{top.name}>", found "</{name}>"'
        )
    if units > top.offset:
        entity = _entity(top, units - top.offset)
        inner = entities[-1] if entities else None
        if top.name == "pre" and inner and inner.get("language") and _same_span(inner, entity):
            return close + 1  # <pre><code class="language-x">: one pre entity with its language
        entities.append(entity)
    return close + 1


def _same_span(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(a["offset"] == b["offset"] and a["length"] == b["length"])


def _entity(tag: _Open, length: int) -> dict[str, Any]:
    entity: dict[str, Any] = {"type": _TAGS[tag.name], "offset": tag.offset, "length": length}
    if tag.name == "a":
        entity["url"] = tag.attributes.get("href", "")
    if tag.name == "code" and tag.attributes.get("class", "").startswith("language-"):
        entity = {**entity, "type": "pre", "language": tag.attributes["class"][9:]}
    if tag.name == "blockquote" and "expandable" in tag.attributes:
        entity["type"] = "expandable_blockquote"
    return entity


def _decode_entity(match: re.Match[str]) -> str | None:
    """The character an entity stands for; None keeps it as typed."""
    body = match.group(1)
    if not body.startswith("#"):
        return _NAMED.get(body)
    code = int(body[2:], 16) if body.startswith("#x") else int(body[1:])
    return chr(code) if 0 < code <= 0x10FFFF else None


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _bytes(source: str, index: int) -> int:
    return len(source[:index].encode("utf-8"))

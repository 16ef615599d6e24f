"""Which session a Chat Completions request runs on, and which of its messages are the turn.

Two modes, one runner (see docs/http-api.md, "Open WebUI and other OpenAI clients"):

- *Session mode*: `X-Hermes-Session-Id` names the session, or the body's `user` names it when
  `gateway.http.user_sessions` is on. The store holds the history; the request's trailing user
  messages (and tool results) are the turn, whatever history the client also sent.
- *Stateless mode* (neither): the request's `messages` are the conversation (OpenAI API
  reference, "Create chat completion": "a list of messages comprising the conversation so
  far"). The history (up to the last assistant message) is looked up by its lineage head
  (`gateway.http.lineage`); a stored session whose head it is continues, and only the new
  messages become the turn, so the model gets that session's active set (compacted once it
  grew past the threshold) plus what is new, not everything the client resent. Otherwise a new
  session imports the history and the new messages are its first turn: a brand-new
  conversation, an edited or regenerated one (a branch), or the loser of two requests that
  extended one head at once (`SessionCatalog.take_lineage` gives the head to one of them).

The client's system messages are kept, after Hermes' own system prompt, in the session's one
system message under `CLIENT_SYSTEM_HEADING`; they are part of the lineage, so a client that
changes its system prompt starts a new session.
"""

from __future__ import annotations

import itertools
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from agent.messages import ChatMessage, content_text, system_message
from agent.redaction import redact_message
from gateway.http.error_envelope import ApiError
from gateway.http.lineage import Split, extend, head_of, split_request
from gateway.http.tool_proxy import new_messages
from gateway.intake import check_length

if TYPE_CHECKING:
    from state.contract import SessionCatalog, Transcript

__all__ = [
    "CLIENT_SYSTEM_HEADING",
    "Conversation",
    "Conversations",
    "as_chat_message",
    "import_history",
    "merge_user_runs",
    "split_messages",
    "turn_of",
]

log = structlog.get_logger(__name__)

CLIENT_SYSTEM_HEADING = "## Instructions from the client application"
STATELESS_CHAT_KEY = "stateless"
"""The chat key of sessions that stateless requests (and Responses) created."""
MAX_HEADLESS_REMEMBERED = 65_536
_CLAIMS_OF = uuid.uuid4().hex[:12]
"""This process, in the claims it writes (unique across workers without a uuid per turn)."""
_claims = itertools.count()
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversation:
    """Where one request runs and what its turn is."""

    session_id: str | None
    """The session to run on; None: the runner routes by chat (session mode with `user`)."""
    turn: tuple[ChatMessage, ...]
    """The request's new messages (user messages, tool results), in order."""
    head: str | None = None
    """Stateless only: the lineage head of history + turn (our reply extends it)."""
    taken: str | None = None
    """Stateless only: the head this request took from a stored conversation (None: it
    started a session)."""

    @property
    def continued(self) -> bool:
        """An existing stored conversation was continued."""
        return self.taken is not None

    @property
    def text(self) -> str:
        """The turn's user words, for the runner's commands and hygiene."""
        return "\n\n".join(content_text(m) for m in self.turn if m.get("role") == "user")


def as_chat_message(raw: Mapping[str, Any]) -> ChatMessage:
    """A client's message in our canonical form: text content (text parts joined), tool calls
    and ids kept, every other field dropped."""
    role = str(raw.get("role"))
    message: ChatMessage = {"role": "system" if role == "developer" else role}
    message["content"] = content_text(raw)  # type: ignore[arg-type]
    if raw.get("_media"):  # images taken at the door (`gateway.http.image_parts`): references
        message["_media"] = list(raw["_media"])
    if role == "assistant" and raw.get("tool_calls"):
        message["tool_calls"] = list(raw["tool_calls"])
        if not message["content"]:
            message["content"] = None
    if role == "tool":
        message["tool_call_id"] = str(raw.get("tool_call_id") or "")
        if raw.get("name"):
            message["name"] = str(raw["name"])
    return message


def import_history(history: Sequence[Mapping[str, Any]], system_prompt: str) -> list[ChatMessage]:
    """What a new session of a stateless conversation starts with: one system message (ours,
    then the client's system messages under `CLIENT_SYSTEM_HEADING`) and the earlier turns."""
    client_system = [content_text(as_chat_message(m)) for m in history if _is_system(m)]
    system = system_prompt
    if any(client_system):
        system = f"{system_prompt}\n\n{CLIENT_SYSTEM_HEADING}\n\n" + "\n\n".join(
            t for t in client_system if t
        )
    turns = [redact_message(as_chat_message(m)) for m in history if not _is_system(m)]
    return [system_message(system), *merge_user_runs(turns)]


def merge_user_runs(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Adjacent user messages as one (their texts joined by a blank line): a client may send
    two in a row, and a provider takes none (the agent would mark a lost reply between)."""
    merged: list[ChatMessage] = []
    for message in messages:
        last = merged[-1] if merged else None
        if last is not None and last.get("role") == "user" and message.get("role") == "user":
            joined = f"{content_text(last)}\n\n{content_text(message)}"
            merged[-1] = {**last, "content": joined}
            if media := [*(last.get("_media") or ()), *(message.get("_media") or ())]:
                merged[-1]["_media"] = media
        else:
            merged.append(message)
    return merged


def _is_system(message: Mapping[str, Any]) -> bool:
    return message.get("role") in ("system", "developer")


def split_messages(messages: Sequence[Mapping[str, Any]]) -> Split:
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") not in _ROLES:
            raise ApiError(
                400,
                f"messages[{index}] needs a role of system, developer, user, assistant or tool",
                param=f"messages[{index}].role",
            )
    split = split_request(messages)
    if split is None or not any(
        m.get("role") == "user" or m.get("role") == "tool" for m in split.new
    ):
        raise ApiError(
            400,
            "messages must end with a user message (or tool results) for the assistant to answer",
            param="messages",
        )
    return split


class Conversations:
    """Resolves requests to sessions over the store, and records each stateless turn's head."""

    def __init__(
        self,
        sessions: SessionCatalog,
        transcript: Transcript,
        *,
        system_prompt: str,
        model: str,
        max_chars: int,
        context_length: int,
    ) -> None:
        self._sessions = sessions
        self._transcript = transcript
        self._system_prompt = system_prompt
        self._model = model
        self._max_chars, self._context_length = max_chars, context_length
        self._headless: OrderedDict[str, None] = OrderedDict()
        """Sessions known to have no head. A head is only ever set on a session a stateless
        request found by its head, so once gone it never comes back (any worker): session
        mode skips the read and the write for them."""

    def admit(self, turn: Sequence[ChatMessage]) -> None:
        """Raise MessageTooLong for a turn the runner would refuse, before a session is made
        or a head taken for it (`gateway.intake.check_length`, the runner's own rule)."""
        text = "\n\n".join(content_text(m) for m in turn)
        check_length(text, max_chars=self._max_chars, context_length=self._context_length)

    async def in_session(
        self, messages: Sequence[ChatMessage], session_id: str | None
    ) -> Conversation:
        """Session mode: the store holds the history; the turn is the request's newest user
        message or the tool results it ends with (`client_tools.new_messages`). A stateless
        session's head is dropped: its history moves without the stateless client (the check
        is a read, once per session and process; only such a session pays a write)."""
        turn = _checked(new_messages(messages))
        if session_id is not None and session_id not in self._headless:
            info = await self._sessions.get_session(session_id)
            if info is not None and info.chat_key == STATELESS_CHAT_KEY:
                await self._sessions.set_lineage(session_id, None)
            self._headless[session_id] = None
            if len(self._headless) > MAX_HEADLESS_REMEMBERED:
                self._headless.popitem(last=False)
        return Conversation(session_id=session_id, turn=turn)

    async def stateless(
        self, messages: Sequence[Mapping[str, Any]], *, user_id: str | None, owner: str
    ) -> Conversation:
        """Stateless mode: continue `owner`'s stored conversation this history is the head of,
        or start a session of theirs that imports it (another key replaying the very same
        history never continues this key's session)."""
        split = split_messages(messages)
        turn = turn_of(split)
        self.admit(turn)
        history_head = head_of(split.history)
        head = extend(history_head, split.new)
        if split.continues:
            found = await self.take(history_head, owner=owner)
            if found is not None:
                return Conversation(session_id=found, turn=turn, head=head, taken=history_head)
        session_id = await self.start(
            split.history, user_id=user_id, owner=owner, branch=split.continues
        )
        return Conversation(session_id=session_id, turn=turn, head=head)

    async def start(
        self,
        history: Sequence[Mapping[str, Any]],
        *,
        user_id: str | None,
        owner: str,
        branch: bool = False,
    ) -> str:
        """A new session of `owner` holding `history` (see `import_history`); returns its id."""
        info = await self._sessions.create_session(
            platform="http",
            chat_key=STATELESS_CHAT_KEY,
            user_id=user_id,
            model=self._model,
            owner=owner,
        )
        await self._transcript.append(info.id, import_history(history, self._system_prompt))
        log.info(
            "stateless_conversation_started",
            session_id=info.id,
            imported=len(history),
            branch=branch,
        )
        return info.id

    async def take(self, head: str, *, owner: str) -> str | None:
        """`owner`'s session whose head is `head`, claimed for one turn (None: none, taken,
        or another owner's)."""
        claim = f"turn:{_CLAIMS_OF}:{next(_claims)}"
        return await self._sessions.take_lineage(head, claim, owner=owner)

    async def give_back(self, conversation: Conversation) -> None:
        """The turn was refused before anything was stored: the conversation keeps the head it
        had, so the client's next (shorter) request still continues it."""
        if conversation.taken is not None and conversation.session_id is not None:
            await self._sessions.set_lineage(conversation.session_id, conversation.taken)

    async def settle(
        self, conversation: Conversation, session_id: str, reply: Mapping[str, Any] | None
    ) -> None:
        """After the turn: a stateless conversation's head becomes history + turn + `reply`
        (the assistant message as the client receives it) on `session_id` (the session the turn
        ended on: a rotating compaction moves it). No reply (a failure, an interruption): no
        head, so the next request starts a new session rather than guess what was stored."""
        if conversation.head is None:
            return
        if conversation.session_id is not None and conversation.session_id != session_id:
            await self._sessions.set_lineage(conversation.session_id, None)
        head = None if reply is None else extend(conversation.head, [reply])
        await self._sessions.set_lineage(session_id, head)


def turn_of(split: Split) -> tuple[ChatMessage, ...]:
    """A stateless request's new messages as the turn (adjacent user messages joined)."""
    return _checked(merge_user_runs([redact_message(as_chat_message(m)) for m in split.new]))


def _checked(turn: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
    """The turn, unless it is empty or ends with a user message without text (a 400)."""
    last = turn[-1] if turn else None
    if last is None or (
        last.get("role") == "user" and not content_text(last) and not last.get("_media")
    ):
        raise ApiError(400, "messages must contain a user message with text")
    return tuple(turn)

"""The multi-session replay: one person, the seeded conversation split into sessions, facts told
early and asked later; how many are found in memory, and what the profile costs per request.

The seeded 500 turns (`sim.conversation`) become `sessions` sessions of one person
(`terminal:local`), separated by `/new`, through the real runtime, runner and store on the sim
server. Into the first half of the sessions go `facts` personal facts, each a unique made-up
word: half as "Please remember: ..." (the scripted model answers with the `memory` tool, as
its description asks), half said in passing ("By the way, ...", which only the compaction
summary can keep: the scripted summarizer follows the summary request's facts instruction and
lists each such sentence with its row anchor). The second half of the sessions asks them back.
Three standing preferences about the person are said in the first session (the ledger offers
them to the profile). Nothing here decides anything about memory: it drives and observes.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from agent.memory.block import MEMORY_END, MEMORY_START
from agent.memory.facts import FACTS_CLOSE, FACTS_OPEN
from sim.conversation import ScriptedTurn, generate_conversation
from sim.llm_server import FakeLLM, ToolCallSpec, Turn, tokens_of_text
from sim.model import SimModel, is_summary_request

__all__ = ["MemoryReplayOptions", "PersonFact", "plan_facts", "run_memory_replay"]

OWNER = "terminal:local"
SUBJECTS = (
    "dog", "cat", "sister", "brother", "dentist", "landlord", "boss", "neighbour", "cousin",
    "daughter", "son", "grandmother", "mechanic", "accountant", "piano teacher", "best friend",
    "godmother", "nephew", "niece", "physiotherapist", "barber", "tailor", "coach", "uncle",
    "aunt",
)  # fmt: skip
PREFERENCES = (
    "Always answer in British English.",
    "Always call me Sam.",
    "Always keep your answers short.",
)
SEARCH_TOP = 5
"""A fact counts as found when the memory tool's search for its question returns it in the
first this-many hits."""
_BY_THE_WAY_RE = re.compile(r"\[user #(\d+)\][^\[]*?By the way, ([^.\n]+)\.", re.S)
_REMEMBER_RE = re.compile(r"Please remember: ([^.\n]+)\.")


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryReplayOptions:
    turns: int = 500
    sessions: int = 10
    facts: int = 50
    context_window: int = 128_000
    seed: int = 7


@dataclass(frozen=True, slots=True, kw_only=True)
class PersonFact:
    """One fact about the person: said at `told_turn`, asked at `asked_turn`."""

    statement: str
    question: str
    answer: str
    """The unique made-up word that only this fact contains."""
    via: Literal["tool", "compaction"]
    told_turn: int
    asked_turn: int


def plan_facts(
    conversation: Sequence[ScriptedTurn], options: MemoryReplayOptions
) -> list[PersonFact]:
    """Where each fact is told and asked: told in the first half of the sessions (the "tool"
    half in turns without tool calls, so the scripted plan is not disturbed), asked in the
    second half, one per turn."""
    rng = random.Random(options.seed * 7919)
    per = len(conversation) // options.sessions
    early = [t for t in conversation if t.index < per * options.sessions // 2 and t.index > 0]
    late = [t for t in conversation if t.index >= per * options.sessions // 2]
    quiet = [t.index for t in early if not t.steps]
    busy = [t.index for t in early if t.steps]
    rng.shuffle(quiet)
    rng.shuffle(busy)
    asked = sorted(rng.sample([t.index for t in late], options.facts))
    facts: list[PersonFact] = []
    for n in range(options.facts):
        subject = SUBJECTS[n // 2 % len(SUBJECTS)]
        word = f"{rng.choice(('Vel', 'Mor', 'Tas', 'Quin', 'Bra'))}{rng.choice('aeiou')}nd{n:02d}"
        if n % 2 == 0:
            statement, question = f"my {subject} is called {word}", f"what is my {subject} called"
        else:
            statement, question = f"my {subject} lives in {word}", f"where does my {subject} live"
        via: Literal["tool", "compaction"] = "tool" if n % 2 == 0 and quiet else "compaction"
        told = quiet.pop() if via == "tool" else busy.pop()
        facts.append(
            PersonFact(
                statement=statement,
                question=question,
                answer=word,
                via=via,
                told_turn=told,
                asked_turn=asked[n],
            )
        )
    return facts


def with_facts(
    conversation: Sequence[ScriptedTurn], facts: Sequence[PersonFact]
) -> list[ScriptedTurn]:
    """The conversation with each fact said and asked where planned, and the preferences in
    the first turns."""
    told = {f.told_turn: f for f in facts}
    asked = {f.asked_turn: f for f in facts}
    turns: list[ScriptedTurn] = []
    for turn in conversation:
        text = turn.user_text
        if turn.index < len(PREFERENCES):
            text = f"{PREFERENCES[turn.index]} {text}"
        if (fact := told.get(turn.index)) is not None:
            lead = "Please remember:" if fact.via == "tool" else "By the way,"
            text = f"{text}\n\n{lead} {fact.statement}."
        if (fact := asked.get(turn.index)) is not None:
            text = f"{text}\n\nAlso, {fact.question}?"
        turns.append(replace(turn, user_text=text))
    return turns


@dataclass(slots=True)
class _PersonModel:
    """`SimModel` plus what a model following our prompts does with memory: calls the
    `memory` tool for "Please remember: ...", lists "By the way, ..." sentences in the summary's
    facts section with their anchors. It also measures the memory block of every request."""

    inner: SimModel
    facts: Sequence[PersonFact]
    block_tokens: list[int] = field(default_factory=list)
    in_context: set[str] = field(default_factory=set)
    remembered_calls: int = 0

    def __call__(self, body: dict[str, Any], api: str) -> Turn:
        if is_summary_request(body):
            return self._summary(body, api)
        system = _text(body.get("system"))
        start, end = system.find(MEMORY_START), system.find(MEMORY_END)
        block = system[start : end + len(MEMORY_END)] if start >= 0 <= end else ""
        self.block_tokens.append(tokens_of_text(block) if block else 0)
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        newest = _text(last.get("content")) if last.get("role") == "user" else ""
        for fact in self.facts:
            if f"{fact.question}?" in newest and fact.answer in _all(body, skip_last=True):
                self.in_context.add(fact.answer)
        wanted = _REMEMBER_RE.search(newest)
        if wanted is not None and not _has_tool_result(last):
            self.remembered_calls += 1
            args = json.dumps({"action": "remember", "text": wanted.group(1)})
            return Turn(text="Noting that.", tool_calls=[ToolCallSpec("memory", args)])
        return self.inner(body, api)

    def _summary(self, body: dict[str, Any], api: str) -> Turn:
        turn = self.inner(body, api)
        prompt = _all(body)
        if FACTS_OPEN not in prompt:
            return turn
        found = [f"- {m.group(2)} [#{m.group(1)}]" for m in _BY_THE_WAY_RE.finditer(prompt)]
        section = "\n".join([FACTS_OPEN, *(found or ["None"]), FACTS_CLOSE])
        room = int(int(body.get("max_tokens") or 4096) * 0.95) * 4 - len(section) - 2
        return replace(turn, text=f"{turn.text[: max(0, room)].rstrip()}\n\n{section}")


async def run_memory_replay(options: MemoryReplayOptions, workdir: Path) -> dict[str, Any]:
    """Drive the sessions and measure; the JSON-ready result (assumptions included)."""
    from agent.access import Principal, TurnAccess
    from agent.memory.tool import memory_tool
    from cli.runtime import Runtime
    from gateway.platforms.base import ChatRef, InboundMessage
    from gateway.run import GatewayRunner
    from sim.replay import ReplayOptions, build_config
    from sim.tools import sim_tool_registry

    base = generate_conversation(seed=options.seed, turns=options.turns)
    facts = plan_facts(base, options)
    conversation = with_facts(base, facts)
    model = _PersonModel(SimModel(conversation), facts)
    per = len(conversation) // options.sessions
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    replay = ReplayOptions(turns=options.turns, context_window=options.context_window)
    async with FakeLLM(responder=model, record_bodies=False) as server:
        db_url = f"sqlite+aiosqlite:///{workdir / 'state.db'}"
        config = build_config("batch", replay, base_url=server.url, db_url=db_url)
        runtime = await Runtime.start(config, workdir, {})
        try:
            tools = sim_tool_registry(options.seed).extended([memory_tool()])
            runtime.deps = replace(runtime.deps, tools=tools)
            principal = Principal.operator(tools.names(), can_approve=False)
            access = TurnAccess(principal=principal)
            runner = GatewayRunner(runtime)
            sessions: list[str] = []
            for turn in conversation:
                if turn.index and turn.index % per == 0:
                    await _submit(runner, "/new", access, ChatRef, InboundMessage)
                outcome = await _submit(runner, turn.user_text, access, ChatRef, InboundMessage)
                if outcome.session_id and (not sessions or sessions[-1] != outcome.session_id):
                    sessions.append(outcome.session_id)
            await runner.stop(timeout_s=60)
            store = runtime.store
            result = await _measure(store, facts, model, sessions)
        finally:
            await runtime.aclose()
    return {"options": _options(options), "assumptions": ASSUMPTIONS, **result}


async def _submit(runner: Any, text: str, access: Any, chat_ref: Any, inbound: Any) -> Any:
    message = inbound(
        chat=chat_ref(platform="terminal", chat_id="replay"),
        user_id="sim-user",
        text=text,
        is_direct=True,
    )
    async with asyncio.timeout(120):
        return await runner.submit(message, _Sink(), access=access)


async def _measure(
    store: Any, facts: Sequence[PersonFact], model: _PersonModel, sessions: Sequence[str]
) -> dict[str, Any]:
    entries = await store.memory.list_memory(OWNER)
    texts = " ".join(e.text for e in entries)
    found: dict[str, list[str]] = {"tool": [], "compaction": []}
    for fact in facts:
        hits = await store.memory.search_memory(OWNER, fact.question, limit=SEARCH_TOP)
        if any(fact.answer in h.entry.text for h in hits):
            found[fact.via].append(fact.answer)
    compactions = 0
    for session_id in sessions:
        info = await store.sessions.get_session(session_id)
        compactions += info.compactions if info is not None else 0
    tokens = model.block_tokens
    profile = [e for e in entries if e.kind == "profile"]
    by_via = {v: sum(1 for f in facts if f.via == v) for v in ("tool", "compaction")}
    return {
        "sessions": len(sessions),
        "batch_compactions": compactions,
        "facts": {
            "told": len(facts),
            "stored": sum(1 for f in facts if f.answer in texts),
            "found_in_memory": sum(len(v) for v in found.values()),
            "found_by_path": {v: f"{len(found[v])}/{by_via[v]}" for v in found},
            "in_context_when_asked_without_a_tool_call": len(model.in_context),
            "memory_tool_calls": model.remembered_calls,
        },
        "profile": {
            "entries": [e.text for e in profile],
            "notes": len(entries) - len(profile),
            "requests": len(tokens),
            "tokens_per_request_mean": round(sum(tokens) / max(1, len(tokens)), 1),
            "tokens_per_request_max": max(tokens, default=0),
            "tokens_per_request_with_block_mean": round(
                sum(t for t in tokens if t) / max(1, sum(1 for t in tokens if t)), 1
            ),
        },
    }


ASSUMPTIONS = [
    "one person (terminal:local); the seeded turns split evenly into sessions by /new",
    "facts are told in the first half of the sessions and asked in the second half",
    "half the facts are said as 'Please remember: ...' and the scripted model calls the memory "
    "tool for them (a real model may not always); the other half are said in passing and only "
    "a compaction summary can keep them (the scripted summarizer lists every one it sees)",
    f"found in memory: the memory tool's search for the question returns the fact in its top "
    f"{SEARCH_TOP} hits (full text; no embeddings)",
    "in context when asked: the fact's word is in the request of the turn that asks, before "
    "any tool call (the profile and the notes offered at a session's first message only)",
    "tokens per request: the memory block in the system message, sim tokenizer (chars / 4); "
    "in-loop batch compaction only (no micro-compaction, no speculation)",
]


def _options(options: MemoryReplayOptions) -> dict[str, Any]:
    return {
        "turns": options.turns,
        "sessions": options.sessions,
        "facts": options.facts,
        "context_window": options.context_window,
        "seed": options.seed,
    }


class _Sink:
    streams = False

    async def start(self, session_id: str) -> None:
        return None

    async def on_text(self, delta: str) -> None:
        return None

    async def notice(self, text: str) -> None:
        return None

    async def finish(self, text: str) -> None:
        return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def _all(body: dict[str, Any], *, skip_last: bool = False) -> str:
    messages = body.get("messages") or []
    if skip_last:
        messages = messages[:-1]
    parts = [_text(body.get("system")), *(_text(m.get("content")) for m in messages)]
    return "\n".join(parts)


def _has_tool_result(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )

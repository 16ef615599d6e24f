"""A seeded long conversation: a user driving a coding task, turn by turn, as plain values.

`generate_conversation(seed=…, turns=…)` is pure: the same seed gives the same prompts, tool
plans, long pastes and idle gaps. Every user prompt carries a unique ticket tag (`HRM-1042`), so
the replay can prove each one is still findable in the store at the end of a session.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

__all__ = [
    "CONSTRAINTS",
    "PROJECT_FILES",
    "ScriptedTurn",
    "SimCall",
    "generate_conversation",
    "tag_of",
    "turn_index_of",
]

TAG_BASE = 1000
"""Ticket numbers start here: turn i carries `HRM-{TAG_BASE + i}`."""
PROJECT_FILES = (
    "src/hermes_net/retry.py",
    "src/hermes_net/client.py",
    "src/hermes_net/pool.py",
    "src/hermes_net/tls.py",
    "src/hermes_net/h1.py",
    "src/hermes_net/h2/frames.py",
    "src/hermes_net/h2/streams.py",
    "src/hermes_net/cookies.py",
    "src/hermes_net/auth.py",
    "src/hermes_net/proxy.py",
    "src/hermes_net/timeouts.py",
    "src/hermes_net/errors.py",
    "src/hermes_net/config.py",
    "src/hermes_net/cache/store.py",
    "src/hermes_net/cache/policy.py",
    "src/hermes_net/dns.py",
    "src/hermes_net/metrics.py",
    "src/hermes_net/cli.py",
    "tests/test_retry.py",
    "tests/test_pool.py",
    "tests/test_h2_frames.py",
    "tests/test_cache_policy.py",
    "docs/architecture.md",
    "pyproject.toml",
)
_SYMBOLS = (
    "backoff_delay",
    "acquire_connection",
    "parse_status_line",
    "encode_headers_frame",
    "merge_cookies",
    "resolve_proxy",
    "read_timeout",
    "should_retry",
    "evict_expired",
    "verify_hostname",
    "window_update",
    "format_metrics",
)
_TOPICS = (
    "connection reuse after a 503",
    "retry budget exhaustion",
    "HTTP/2 flow control",
    "cookie domain matching",
    "proxy authentication",
    "read timeouts on slow bodies",
    "cache revalidation with ETag",
    "DNS failover",
    "TLS session resumption",
    "metrics cardinality",
)
CONSTRAINTS = (
    "use the existing retry helper, don't add a new one",
    "never change the public API",
    "no new dependencies",
    "always stay compatible with Python 3.11",
    "always keep a change small enough to review in one sitting",
    "log counts, never request bodies",
)
"""The standing constraints the simulated user gives (implement turns carry one each), phrased
as a person states a standing rule; the replay checks each is still in the active context."""
_TAG_RE = re.compile(r"\bHRM-(\d{4,})\b")


@dataclass(frozen=True, slots=True, kw_only=True)
class SimCall:
    """One tool call the scripted model will make."""

    name: str
    arguments: str
    """JSON object text."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptedTurn:
    """One user turn and the model's plan for it."""

    index: int
    tag: str
    """The unique ticket tag in the prompt (`HRM-1042`)."""
    user_text: str
    gap_s: float
    """Idle time before this prompt (simulated; it ages the prompt cache)."""
    steps: tuple[tuple[SimCall, ...], ...]
    """Tool-call rounds, in order; the calls of one round run in parallel."""
    preambles: tuple[str, ...]
    """The assistant text that accompanies each round of tool calls."""
    reply_text: str
    kind: str
    """explore | implement | test | question | paste | recall"""


def tag_of(index: int) -> str:
    return f"HRM-{TAG_BASE + index}"


def turn_index_of(text: str) -> int | None:
    """The turn index named by the last ticket tag in `text`, or None."""
    found = _TAG_RE.findall(text)
    return int(found[-1]) - TAG_BASE if found else None


def generate_conversation(*, seed: int, turns: int) -> tuple[ScriptedTurn, ...]:
    """`turns` scripted turns; deterministic for a given seed."""
    rng = random.Random(seed)
    return tuple(_turn(rng, index) for index in range(turns))


def idle_gap_s(rng: random.Random) -> float:
    """Seconds to hours: mostly quick follow-ups, sometimes a coffee break or a night."""
    roll = rng.random()
    if roll < 0.60:
        return round(rng.uniform(8, 150), 1)
    if roll < 0.85:
        return round(rng.uniform(150, 900), 1)
    if roll < 0.96:
        return round(rng.uniform(900, 5400), 1)
    return round(rng.uniform(2 * 3600, 14 * 3600), 1)


def _turn(rng: random.Random, index: int) -> ScriptedTurn:
    kind = rng.choices(
        ("explore", "implement", "test", "question", "paste", "recall"),
        weights=(30, 25, 20, 12, 6, 7 if index > 20 else 0),
    )[0]
    tag = tag_of(index)
    path, other = rng.sample(PROJECT_FILES, 2)
    symbol, topic = rng.choice(_SYMBOLS), rng.choice(_TOPICS)
    gap = 0.0 if index == 0 else idle_gap_s(rng)
    steps: list[tuple[SimCall, ...]]
    match kind:
        case "explore":
            text = f"Where do we handle {topic}? Start from `{symbol}` ({tag})."
            steps = [(_call("grep", pattern=symbol),), (_call("read_file", path=path),)]
            if rng.random() < 0.5:
                steps.append((_call("read_file", path=other),))
        case "implement":
            rule = rng.choice(CONSTRAINTS)
            text = f"Change `{symbol}` in {path} to fix {topic}; {rule}. Ticket {tag}."
            steps = [
                (_call("read_file", path=path),),
                (_call("edit_file", path=path, symbol=symbol),),
                (_call("run_tests", target=_test_target(rng)),),
            ]
        case "test":
            text = f"Run the tests for {path} and tell me what fails ({tag})."
            steps = [(_call("run_tests", target=_test_target(rng)),)]
            if rng.random() < 0.6:
                steps.append((_call("read_file", path=other), _call("grep", pattern=symbol)))
        case "question":
            text = f"Quick question ({tag}): is {topic} worth a config flag, or is a constant fine?"
            steps = []
        case "paste":
            text = f"CI failed on {tag}; here is the log:\n\n{_ci_log(rng, symbol, path)}"
            steps = [(_call("read_file", path=path),)]
        case "recall":
            earlier = tag_of(rng.randrange(0, index))
            text = f"What did I ask for in {earlier}? Check before we go on ({tag})."
            steps = [(_call("session_search", query=earlier, session_only=True),)]
        case _:
            raise AssertionError(kind)
    preambles = tuple(_preamble(rng, step) for step in steps)
    reply = _reply(rng, kind, symbol, path, topic)
    return ScriptedTurn(
        index=index,
        tag=tag,
        user_text=text,
        gap_s=gap,
        steps=tuple(steps),
        preambles=preambles,
        reply_text=reply,
        kind=kind,
    )


def _call(name: str, **arguments: object) -> SimCall:
    return SimCall(name=name, arguments=json.dumps(arguments, sort_keys=True))


def _test_target(rng: random.Random) -> str:
    return rng.choice([p for p in PROJECT_FILES if p.startswith("tests/")])


def _preamble(rng: random.Random, step: tuple[SimCall, ...]) -> str:
    names = ", ".join(c.name for c in step)
    opener = rng.choice(("Let me check", "I'll look at this with", "Next,", "Using"))
    return f"{opener} {names}."


def _reply(rng: random.Random, kind: str, symbol: str, path: str, topic: str) -> str:
    sentences = [
        f"`{symbol}` in {path} is where {topic} is decided.",
        "The retry loop re-reads the budget on every attempt, so a slow server eats it quickly.",
        "I kept the public API unchanged and reused the existing helper.",
        "Two tests covered the old behaviour; both now assert the new delay sequence.",
        "The pool returns a connection only after the body is drained, which avoids the reuse bug.",
        "One open question: whether the limit belongs in config or stays a named constant.",
        "Nothing else depends on this path, so the change stays local.",
        "The failure was an off-by-one in the window accounting, not a timing issue.",
    ]
    count = {"question": 2, "recall": 2}.get(kind, rng.randint(3, 7))
    body = " ".join(rng.sample(sentences, min(count, len(sentences))))
    return f"{body} Next step: {rng.choice(('run the full suite', 'review the diff', 'update the docs'))}."


def _ci_log(rng: random.Random, symbol: str, path: str) -> str:
    lines = []
    for n in range(rng.randint(120, 600)):
        ms = rng.randint(1, 900)
        if n % 37 == 5:
            lines.append(f"E   AssertionError: {symbol} returned {rng.randint(0, 99)} (expected 0)")
        else:
            lines.append(f"{path}::test_case_{n:03d} PASSED [{ms} ms] worker gw{n % 4}")
    return "\n".join(lines)

"""The replay's latency model: how many seconds a model call takes, from its usage; pure.

A call takes `first_token_s + uncached / prefill_tok_s + cached * cache_read_cost / prefill_tok_s
+ output / decode_tok_s`, where `uncached` is the prompt the server had to prefill (input tokens
plus cache writes), `cached` the prompt it read from its prompt cache, and `output` the tokens it
generated. A cached token is not free: the server still attends over it, so it costs
`cache_read_cost` of an uncached one.

Presets (`RATE_PRESETS`):

- `local`: the seed's "7B 4-bit instruct, local (MLX, Apple Silicon), ~31 s per pass; box also
  serving other work", whose passes "ran 2 to 37 seconds, median around 31" on prompts of "a few
  thousand tokens". A 7B 4-bit model on an Apple-Silicon laptop prefills some 800-1,000 tokens/s
  and decodes 35-45 tokens/s when it has the machine to itself; sharing it, about half that:
  500 tokens/s and 20 tokens/s, with 0.3 s to the first token. That reproduces the seed's table: a
  median pass (3,000 tokens in: rules, a rolling summary near its defrag size, one exchange; 500
  out) takes 0.3 + 6 + 25 = 31.3 s; a first pass (800 in, 20 out) 2.9 s; a large one (3,500 in,
  600 out) 37.3 s. A local server reuses the KV of a prompt prefix it just served, so a cached
  token costs 5% of an uncached one.
- `hosted`: a hosted frontier model (Claude Sonnet class) over the API: 60 tokens/s out (public
  measurements of such models sit at 50-80), 4,000 prompt tokens/s uncached (a 100K-token cold
  prompt then waits 25 s for its first token, as such APIs do), 0.8 s to the first token; prompt
  caching "reduces latency by up to 85% for long prompts" (Anthropic's docs), so a cached token
  costs 10%.
- `hosted-small`: a small hosted model (Haiku class) for the summarizer: 150 tokens/s out,
  10,000 prompt tokens/s, 0.4 s to the first token, cached tokens at 10%.

`none` (the default) makes every call instant, as the replay was before this model existed.

`shared_server` says that the main model and the summarizer are one server that answers one
request at a time (one local process, one slot): a call that arrives while another is being
served waits for it, first come first served (`sim.capacity`). It is the default of the `local`
preset when the summarizer runs on the same model (a laptop serves one request at a time);
`separate` capacity (every call starts when it is made, as on a hosted API) is the default of the
other presets and an opt-out for `local`. The waiting is counted as the caller's wait, so a user
turn queued behind a background summary waits on compaction.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, assert_never

from agent.providers.base import Usage

__all__ = [
    "LATENCY_PRESETS",
    "NO_LATENCY",
    "RATE_PRESETS",
    "LatencyModel",
    "Rates",
    "Role",
    "build_latency_model",
    "shares_by_default",
]

Role = Literal["main", "summary"]
"""Whose call it is: the agent's own (it offers tools) or a summarizer's (no tools)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Rates:
    """One model server's speed."""

    prefill_tok_s: float
    """Uncached prompt tokens processed per second."""
    decode_tok_s: float
    """Output tokens generated per second."""
    first_token_s: float = 0.0
    """Fixed overhead of a call: queueing, scheduling, the first token's round trip."""
    cache_read_cost: float = 0.0
    """What a prompt token read from the cache costs, as a share of an uncached one."""

    def __post_init__(self) -> None:
        if not (self.prefill_tok_s > 0 and self.decode_tok_s > 0):
            raise ValueError("prefill_tok_s and decode_tok_s must be positive")
        if self.first_token_s < 0 or not 0 <= self.cache_read_cost <= 1:
            raise ValueError("first_token_s must be >= 0 and cache_read_cost within 0..1")

    def seconds(self, usage: Usage) -> float:
        """How long a call with this usage takes on this server."""
        uncached = usage.input_tokens + usage.cache_write_tokens
        prefill = uncached + usage.cache_read_tokens * self.cache_read_cost
        return (
            self.first_token_s
            + prefill / self.prefill_tok_s
            + (usage.output_tokens / self.decode_tok_s)
        )


INSTANT = Rates(prefill_tok_s=math.inf, decode_tok_s=math.inf)
RATE_PRESETS: Mapping[str, Rates] = {
    "local": Rates(prefill_tok_s=500, decode_tok_s=20, first_token_s=0.3, cache_read_cost=0.05),
    "hosted": Rates(prefill_tok_s=4_000, decode_tok_s=60, first_token_s=0.8, cache_read_cost=0.1),
    "hosted-small": Rates(
        prefill_tok_s=10_000, decode_tok_s=150, first_token_s=0.4, cache_read_cost=0.1
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyModel:
    """The main model's and the summarizer's rates, and whether they share one server."""

    name: str
    main: Rates
    summarizer: Rates
    shared_server: bool = False

    @property
    def is_instant(self) -> bool:
        return self.main == INSTANT and self.summarizer == INSTANT

    def seconds(self, role: Role, usage: Usage) -> float:
        """How long one call of `role` with this usage takes."""
        match role:
            case "main":
                return self.main.seconds(usage)
            case "summary":
                return self.summarizer.seconds(usage)
            case unreachable:
                assert_never(unreachable)

    def describe(self) -> dict[str, Any]:
        """The JSON form, for the replay's options."""
        rates = (
            {}
            if self.is_instant
            else {"main": asdict(self.main), "summarizer": asdict(self.summarizer)}
        )
        return {
            "name": self.name,
            "shared_server": self.shared_server,
            "capacity": self.capacity,
            **rates,
        }

    @property
    def capacity(self) -> str:
        """The capacity assumption, in words, for the output."""
        if self.is_instant:
            return "instant (no latency model: capacity does not matter)"
        if self.shared_server:
            return "shared: main model and summarizer on one server, one request at a time"
        return "separate: every call is served when it is made (unlimited capacity)"


NO_LATENCY = LatencyModel(name="none", main=INSTANT, summarizer=INSTANT)
LATENCY_PRESETS = ("none", *RATE_PRESETS)


SHARED_BY_DEFAULT = frozenset({"local"})
"""Presets that model one local server: the summarizer shares it unless told otherwise."""


def shares_by_default(main: str, summarizer: str | None) -> bool:
    """One local server answers the agent and the summarizer, when both run on it."""
    return main in SHARED_BY_DEFAULT and summarizer in (None, main)


def build_latency_model(
    main: str, summarizer: str | None = None, *, shared_server: bool | None = None
) -> LatencyModel:
    """A preset name (`none`, `local`, `hosted`, `hosted-small`) or a JSON file of rates for the
    main model, and optionally another for the summarizer (default: the main model's).
    `shared_server` None takes the preset's default (`shares_by_default`)."""
    main_rates = _rates(main)
    summary_rates = main_rates if summarizer is None else _rates(summarizer)
    if main_rates is INSTANT and summary_rates is INSTANT:
        return NO_LATENCY
    if (main_rates is INSTANT) != (summary_rates is INSTANT):
        raise ValueError("'none' cannot be mixed with a latency preset")
    name = main if summarizer in (None, main) else f"{main}+{summarizer}"
    shared = shares_by_default(main, summarizer) if shared_server is None else shared_server
    return LatencyModel(name=name, main=main_rates, summarizer=summary_rates, shared_server=shared)


def _rates(spec: str) -> Rates:
    if spec == "none":
        return INSTANT
    preset = RATE_PRESETS.get(spec)
    if preset is not None:
        return preset
    path = Path(spec)
    if path.suffix != ".json":
        known = ", ".join(LATENCY_PRESETS)
        raise ValueError(f"unknown latency model {spec!r}; use one of {known} or a .json file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Rates(**data)
    except (OSError, ValueError, TypeError) as exc:
        raise ValueError(f"cannot read rates from {spec}: {exc}") from exc

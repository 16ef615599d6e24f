"""What one replay runs: the modes, the route, the user's pace, and the config of each mode.

Modes (`MODES`) are settings of the runtime, plus one thing the driver does (`batch`):

- `batch`: the anchor's (Hermes Agent's) batch compaction, the baseline: no background work;
  when a message arrives and the context is at or past the threshold, the session is compacted
  at once, inside that turn, before its first model call (the user waits for the summary). The
  anchor also checks between tool rounds of a turn; here a turn that crosses the threshold
  compacts at the start of the next one (gateway hygiene and the overflow guard still apply).
- `hygiene-only`: the runtime with `speculative: false` and nothing else: nothing compacts at the
  threshold, only gateway hygiene (85% of the window) or a request that would not fit. This was
  the replay's `batch` before issue 31.
- `speculative`: batch compaction prepared in the background ahead of the threshold, adopted at
  the turn boundary.
- `micro-always`: that plus a micro fold after every turn (the seed's cadence).
- `micro-cold`: the default config (prepared batch compaction, micro folds while the prompt
  cache is cold, or whatever the default cadence decides on the route).
- `lcm`: the lossless engine plugin, prepared ahead.

Routes (`ROUTES`): `anthropic` is a Claude-shaped model over the Anthropic wire with a 5-minute
prompt cache (cache reads billed at a tenth); `custom` is a local model reached through
`model.provider: custom` (OpenAI Chat Completions wire, a model name no price table knows, no
cache_control, so the agent runs as it does on any local server: `cache_ttl` is None). Both are
priced with the same table (`price_model`, claude-sonnet rates by default) so their cost columns
compare; on `custom` every prompt token is billed in full (no provider cache discount) and the
cost is a proxy for the compute a local model spends.

Pace: the user's idle gaps come from the seeded conversation (seconds to hours), or none at all
(`back_to_back`: a client that sends the next message the moment the reply is out).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent.config import HermesConfig, PriceEntry, parse_config
from sim.latency import NO_LATENCY, LatencyModel

__all__ = [
    "IN_TURN_AT_THRESHOLD",
    "LOCAL_SIM_MODEL",
    "MODES",
    "ROUTES",
    "SIM_MODEL",
    "ReplayOptions",
    "Route",
    "assumptions",
    "build_config",
    "load_price_table",
]

MODES = ("batch", "hygiene-only", "speculative", "micro-always", "micro-cold", "lcm")
IN_TURN_AT_THRESHOLD = frozenset({"batch"})
"""Modes whose driver compacts inside the turn at the threshold, as the anchor does."""
DEFAULT_MODE = "micro-cold"
Route = Literal["anthropic", "custom"]
ROUTES: tuple[Route, ...] = ("anthropic", "custom")
SIM_MODEL = "claude-sonnet-sim"
"""A Claude-shaped name (so caching applies and the sonnet price matches) that no API serves."""
LOCAL_SIM_MODEL = "local-7b-instruct-sim"
"""The custom route's model: a local model's name, in no price table, not Claude."""
SIM_API_KEY = "sim-offline-key"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayOptions:
    """What to replay and how."""

    turns: int = 500
    context_window: int = 128_000
    seed: int = 7
    latency_ms: float = 0.0
    prices: Mapping[str, PriceEntry] | None = None
    """None means the config's default price table."""
    route: Route = "anthropic"
    model: str | None = None
    """The model name the runtime is configured with; None: the route's (`served_model`)."""
    price_model: str = SIM_MODEL
    """Whose prices the replay bills every call at (both routes, so the costs compare)."""
    caching: bool = True
    """prompt_caching.enabled; off makes every prompt token full price."""
    cache_ttl: str = "5m"
    latency: LatencyModel = NO_LATENCY
    """How long model calls take on the simulated clock (`sim.latency`); none: instant."""
    back_to_back: bool = False
    """No idle gap: every message arrives the moment the previous reply is out."""

    @property
    def served_model(self) -> str:
        if self.model is not None:
            return self.model
        return SIM_MODEL if self.route == "anthropic" else LOCAL_SIM_MODEL

    @property
    def billed_cache(self) -> bool:
        """Whether cache reads are billed at the cache price (only where a provider offers it)."""
        return self.route == "anthropic"


def load_price_table(path: Path | None) -> dict[str, PriceEntry] | None:
    """A JSON price table ({model substring: {input, output, cache_write, cache_read}}), or None."""
    if path is None:
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return {key: PriceEntry(**value) for key, value in data.items()}


def build_config(mode: str, options: ReplayOptions, *, base_url: str, db_url: str) -> HermesConfig:
    """The HermesConfig of one mode on the options' route, against the sim server (its root
    URL), with a SQLite store."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    model: dict[str, Any] = {
        "provider": options.route,
        "default": options.served_model,
        "base_url": base_url if options.route == "anthropic" else f"{base_url}/v1",
        "api_key": SIM_API_KEY,
        "context_length": options.context_window,
        "max_retries": 0,
        "timeout_s": 60,
    }
    data: dict[str, Any] = {
        "model": model,
        "compression": {
            "micro_compact": mode in ("micro-always", "micro-cold"),
            "micro_compact_when": "always" if mode == "micro-always" else "cold",
            "speculative": mode not in ("batch", "hygiene-only"),
        },
        "context": {"engine": "lcm" if mode == "lcm" else "compressor"},
        "state": {"url": db_url},
        "tools": {"approval": "deny"},
        "prompt_caching": {"enabled": options.caching, "cache_ttl": options.cache_ttl},
    }
    if options.prices is not None:
        data["pricing"] = {k: v.model_dump() for k, v in options.prices.items()}
    return parse_config(data, path="<replay>")


def assumptions(options: ReplayOptions) -> dict[str, Any]:
    """Every assumption of a run, for the output (`options` of the JSON)."""
    latency = options.latency.describe()
    return {
        "turns": options.turns,
        "context_window": options.context_window,
        "seed": options.seed,
        "route": options.route,
        "route_means": _ROUTE_MEANS[options.route],
        "model": options.served_model,
        "priced_as": options.price_model,
        "billing": "cache reads at the cache price"
        if options.billed_cache
        else "every prompt token at the full input price (no provider cache)",
        "caching": options.caching and options.route == "anthropic",
        "cache_ttl": options.cache_ttl if options.route == "anthropic" else None,
        "pace": "back-to-back: no idle gap between turns"
        if options.back_to_back
        else "idle gaps of the seeded conversation (seconds to hours)",
        "back_to_back": options.back_to_back,
        "capacity": latency["capacity"],
        "prefix_reuse": _PREFIX_REUSE[options.route],
        "latency_model": latency,
        "latency_ms": options.latency_ms,
        "default_mode": DEFAULT_MODE,
        "baseline_mode": "batch",
        "batch_means": "compacts inside the turn at the threshold (the anchor's batch)",
    }


_PREFIX_REUSE: Mapping[Route, str] = {
    "anthropic": "the API's prompt cache: a prefix written at a breakpoint is read back for the "
    "TTL (faster and billed at a tenth)",
    "custom": "the server reuses the longest prompt prefix it served before (llama.cpp's prompt "
    "cache kept in memory): faster, not cheaper; a summary does not evict the conversation's",
}
_ROUTE_MEANS: Mapping[Route, str] = {
    "anthropic": "Claude-shaped model over the Anthropic wire, prompt cache on",
    "custom": "a local model through model.provider: custom (OpenAI wire, no prompt cache)",
}

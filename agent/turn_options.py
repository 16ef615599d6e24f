"""What a caller may ask of one turn besides its words (plain values, threaded from
`GatewayRunner.submit` to `AIAgent.run_turn`; each field's default is "as configured"), and
where a running turn stands (`TurnState`, the agent's own)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from agent.providers.base import Provider, ToolSpec, Usage
from agent.providers.call_options import CallOptions

__all__ = ["TurnOptions", "TurnState"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnOptions:
    """Per-turn overrides; `TurnOptions()` changes nothing."""

    call: CallOptions = field(default_factory=CallOptions)
    """Pass-through model options for every model call of the turn (see `call_options`)."""
    client_tools: tuple[ToolSpec, ...] | None = None
    """The caller's own tools (an OpenAI client's `tools`): when set, these and only these are
    offered to the model, and a call to one ends the turn with the calls (`TurnResult.tool_calls`)
    for the caller to run; Hermes' own tools are not offered."""
    provider: Provider | None = None
    """Answer this turn with this provider instead of the runtime's (a routed model,
    `gateway.http.models`)."""
    model: str | None = None
    """The model name to ask `provider` (or the runtime's provider) for this turn."""
    steer: Callable[[], list[str]] | None = None
    """What the user said while the turn runs (`gateway.steering`): asked before every model
    call after the first; each text joins the transcript, stored, as a user message first."""

    @property
    def proxies_tools(self) -> bool:
        return self.client_tools is not None


@dataclass(slots=True)
class TurnState:
    """One running turn's counters, mutated by the agent as the turn goes."""

    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    compacted: bool = False
    retried_too_long: bool = False
    streamed: str = ""
    """The text streamed of the model call in progress."""
    options: TurnOptions = field(default_factory=TurnOptions)

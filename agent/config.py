"""The configuration tree: one frozen `HermesConfig`, validated by pydantic at the door.

`load_config` reads `config.yaml`; any unknown key or bad value becomes a `ConfigError` that names
the key, the value and the file. Defaults are the named constants below; `config.example.yaml`
documents every key with the same defaults (a test keeps the two in step).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from agent.access import mcp_server_of_grant
from agent.config_memory import EmbeddingsConfig, MemoryConfig
from agent.config_tools import McpConfig, WebConfig
from agent.errors import ConfigError
from agent.media_config import MediaConfig

__all__ = [
    "LOCAL_SERVERS",
    "AgentConfig",
    "AuxiliaryConfig",
    "CompressionConfig",
    "ContextConfig",
    "GatewayConfig",
    "HermesConfig",
    "HttpApiConfig",
    "HttpKeyConfig",
    "HttpModelRoute",
    "EmbeddingsConfig",
    "LoggingConfig",
    "MemoryConfig",
    "MetricsConfig",
    "PrivacyConfig",
    "ModelConfig",
    "PriceEntry",
    "OPTIONAL_TOOL_NAMES",
    "TOOL_NAMES",
    "TerminalConfig",
    "did_you_mean",
    "known_keys",
    "load_config",
    "parse_config",
    "yaml_error_sentence",
]

DEFAULT_THRESHOLD = 0.50
DEFAULT_TARGET_RATIO = 0.20
DEFAULT_PROTECT_LAST_N = 20
DEFAULT_PROTECT_FIRST_N = 3
DEFAULT_MICRO_DEFRAG_TOKENS = 2000
DEFAULT_CODEX_COMPACT_THRESHOLD = 200_000
DEFAULT_APPROVAL_TIMEOUT_S = 120.0
DEFAULT_LOCK_TIMEOUT_S = 60.0
DEFAULT_LEASE_TTL_S = 10.0
DEFAULT_LOG_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_LOG_BACKUPS = 5
DEFAULT_METRICS_PORT = 9464
TOOL_NAMES = (
    "terminal", "read_file", "write_file", "session_search", "recall", "schedule",
    "memory", "read_document", "send_file",
)  # fmt: skip
"""The built-in tools enabled by default, in registry order."""
OPTIONAL_TOOL_NAMES = ("web_fetch", "web_search")
"""Built-in tools a config enables by naming them in `tools.enabled` (they cost context)."""
DEFAULT_SYSTEM_PROMPT = (
    "You are Hermes, a capable personal assistant. Be concise and accurate. "
    "Use tools when they help; say plainly when you are unsure."
)


LOCAL_SERVERS: dict[str, str] = {
    "ollama": "http://127.0.0.1:11434/v1",
    "vllm": "http://127.0.0.1:8000/v1",
    "llamacpp": "http://127.0.0.1:8080/v1",
    "lmstudio": "http://127.0.0.1:1234/v1",
}
"""Local OpenAI-compatible servers: `model.provider: ollama` (…) means `custom` at this URL."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(_Section):
    provider: Literal["anthropic", "openai", "openrouter", "custom", "openai-codex"] = "anthropic"
    """A local server's name (`ollama`, `vllm`, `llamacpp`, `lmstudio`) is read as `custom`
    with that server's default `base_url`."""
    default: str = "claude-sonnet-4-6"
    base_url: str | None = None
    api_key: str | None = None
    api_mode: Literal["chat_completions", "responses", "codex_app_server"] = "chat_completions"
    context_length: int | None = Field(default=None, gt=0)
    max_tokens: int = Field(default=4096, gt=0)
    reply_reserve_tokens: int | None = Field(default=None, gt=0)
    """Room every request leaves for the reply; None = min(max_tokens, 25% of the window)."""
    timeout_s: float = Field(default=120.0, gt=0)
    stream_deadline_s: float | None = Field(default=None, gt=0)
    """A whole streamed reply's budget; None = 5 x timeout_s (timeout_s still bounds each read);
    a custom (local) server has none: it is judged by its silence, not its total time."""
    silence_timeout_s: float | None = Field(default=None, gt=0)
    """How long a streamed reply may go without a byte (prefill included) before the request is
    cancelled (its connection closed) and retried once; None = timeout_s."""
    max_retries: int = Field(default=3, ge=0, le=10)
    concurrency: int | None = Field(default=None, ge=1)
    """Requests the server answers at once; 1: background summaries yield to user turns
    (`agent.server_slot`); None = 1 for `provider: custom`, else no limit."""
    vision: bool | Literal["auto"] = "auto"
    """Whether the model gets images: "auto" knows the big families (`agent.media.vision`);
    a model that cannot see gets a one-line note per image instead."""

    @model_validator(mode="before")
    @classmethod
    def _local_server_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("provider") in LOCAL_SERVERS:
            url = LOCAL_SERVERS[data["provider"]]
            return {**data, "provider": "custom", "base_url": data.get("base_url") or url}
        return data


class AgentConfig(_Section):
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_iterations: int = Field(default=25, gt=0)
    tool_timeout_s: float = Field(default=60.0, gt=0)


class CompressionConfig(_Section):
    enabled: bool = True
    threshold: float = Field(default=DEFAULT_THRESHOLD, gt=0, le=1)
    model_thresholds: dict[str, float] = Field(default_factory=dict)
    target_ratio: float = Field(default=DEFAULT_TARGET_RATIO, gt=0, lt=1)
    tail_mode: Literal["legacy", "lean"] = "legacy"
    protect_first_n: int = Field(default=DEFAULT_PROTECT_FIRST_N, ge=1)
    protect_last_n: int = Field(default=DEFAULT_PROTECT_LAST_N, ge=1)
    min_tail_user_messages: int = Field(default=1, ge=0)
    codex_gpt55_autoraise: bool = True
    codex_gpt55_autoraise_notice: bool = True
    codex_app_server_auto: Literal["native", "hermes", "off"] = "native"
    codex_responses_native: bool = False
    codex_responses_compact_threshold: int = Field(default=DEFAULT_CODEX_COMPACT_THRESHOLD, gt=0)
    in_place: bool = True
    micro_compact: bool = True
    speculative: bool = True
    """Prepare batch compaction in the background ahead of the threshold
    (`agent.prepared_compaction`)."""
    micro_compact_when: Literal["cold", "always"] = "cold"
    micro_occupancy_trigger: float = Field(default=1.0, gt=0, le=1)
    """With `cold`, a pass also runs on a warm cache once occupancy of the threshold passes this."""
    micro_defrag_tokens: int = Field(default=DEFAULT_MICRO_DEFRAG_TOKENS, gt=0)
    receipt: Literal["brief", "off", "full"] = "brief"
    """After a batch compaction, chat users get one message saying what was set aside
    (`gateway.receipts`): brief, full (each archived message's first line too), or off."""

    @field_validator("model_thresholds")
    @classmethod
    def _thresholds_in_range(cls, value: dict[str, float]) -> dict[str, float]:
        for key, ratio in value.items():
            if not 0 < ratio <= 1:
                raise ValueError(f"threshold for {key!r} must be in (0, 1], got {ratio}")
        return value


class AuxiliaryModelConfig(_Section):
    provider: Literal["auto", "main", "anthropic", "openai", "openrouter", "custom"] = "auto"
    """auto and main both mean: the main model's provider."""
    model: str | None = None
    """None means: the main model."""
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = Field(default=120.0, gt=0)


class AuxiliaryConfig(_Section):
    compression: AuxiliaryModelConfig = AuxiliaryModelConfig()


class PromptCachingConfig(_Section):
    enabled: bool = True
    """Caching still only applies to Claude models on routes that accept cache_control."""
    cache_ttl: Literal["5m", "1h"] = "5m"


class ContextConfig(_Section):
    engine: str = "compressor"


class StateConfig(_Section):
    url: str | None = None
    """None means sqlite+aiosqlite at HERMES_HOME/state.db."""
    lock_timeout_s: float = Field(default=DEFAULT_LOCK_TIMEOUT_S, gt=0)
    """How long a message waits while another worker runs a turn of the same session."""
    lease_ttl_s: float = Field(default=DEFAULT_LEASE_TTL_S, gt=0)
    """SQLite: a killed worker's session locks and poller leadership expire after this."""


class TerminalConfig(_Section):
    sandbox: Literal["auto", "bwrap", "none"] = "auto"
    """auto: every command runs under bubblewrap (workspace read-write, the rest read-only, home
    and HERMES_HOME empty, no network); the terminal chat may approve one outside it, and where
    nobody can approve, a missing bwrap refuses commands. bwrap: always the sandbox. none: the
    explicit opt-out (the shell policy alone)."""
    network: bool = False
    """Whether sandboxed commands may use the network (`allow`/`deny` or true/false)."""
    env: list[str] = Field(default_factory=list)
    """Environment variables passed to commands besides PATH, HOME, LANG and TERM."""

    @field_validator("network", mode="before")
    @classmethod
    def _allow_or_deny(cls, value: Any) -> Any:
        words = {"allow": True, "deny": False}
        return words.get(value, value) if isinstance(value, str) else value


class ToolsConfig(_Section):
    enabled: list[str] = Field(default_factory=lambda: list(TOOL_NAMES))
    terminal_timeout_s: float = Field(default=60.0, gt=0)
    max_output_chars: int = Field(default=20_000, gt=100)
    approval: Literal["ask", "deny", "allow"] = "ask"
    """ask: risky actions are asked where someone can approve, refused elsewhere; deny: always
    refused; allow: only destructive ones are asked (and refused where nobody can approve)."""
    approval_timeout_s: float = Field(default=DEFAULT_APPROVAL_TIMEOUT_S, gt=0)
    """How long a chat approval waits for an answer before it counts as a denial."""
    workspace: str | None = None
    """Where file tools may write: default the directory `hermes` started in (terminal) or
    HERMES_HOME/workspace (gateway)."""
    terminal: TerminalConfig = TerminalConfig()


class ScheduleConfig(_Section):
    """Reminders, scheduled jobs and heartbeats (`docs/jobs.md`)."""

    enabled: bool = True
    """`hermes gateway run` fires due jobs (every worker ticks; each job fires on one)."""
    tick_s: float = Field(default=5.0, gt=0)
    """How often a worker looks for due jobs (jittered by a fifth either way)."""
    lease_s: float = Field(default=60.0, gt=0)
    """A run's claim; renewed while it runs; a killed worker's run is redone once it expires."""
    run_timeout_s: float = Field(default=600.0, gt=0)
    """A run that takes longer fails (and is retried with backoff)."""
    timezone: str = "UTC"
    """The zone wall-clock schedules are read in, unless `timezones` names the owner's."""
    timezones: dict[str, str] = Field(default_factory=dict)
    """Per owner (`telegram:42`, `terminal:local`): their IANA zone, e.g. Europe/Berlin."""
    catch_up: Literal["once", "all", "skip"] = "once"
    """After downtime: fire one missed run, every missed run, or none."""
    allow_from_jobs: bool = False
    """Whether a job's own run may create jobs (the schedule tool is withheld otherwise)."""
    heartbeat_model: str | None = None
    """A cheaper model for heartbeats; None: the session's model."""

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        _check_zone(value)
        return value

    @field_validator("timezones")
    @classmethod
    def _known_zones(cls, value: dict[str, str]) -> dict[str, str]:
        for zone in value.values():
            _check_zone(zone)
        return value


def _check_zone(name: str) -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {name!r} (use an IANA name like Europe/Berlin)"
        ) from None


LogLevel = Literal["debug", "info", "warning", "error"]


class LoggingConfig(_Section):
    level: LogLevel = "info"
    loggers: dict[str, LogLevel] = Field(default_factory=dict)
    """Per logger name, over the quiet defaults (httpx, aiosqlite, discord, telegram: warning)."""
    max_bytes: int = Field(default=DEFAULT_LOG_MAX_BYTES, ge=10_000)
    """agent.log is rotated when it would pass this size."""
    backups: int = Field(default=DEFAULT_LOG_BACKUPS, ge=0, le=100)
    """Rotated files kept: agent.log.1 (newest) ... agent.log.N."""


class PriceEntry(_Section):
    """US dollars per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write: float = Field(ge=0)
    cache_read: float = Field(ge=0)


def _default_prices() -> dict[str, PriceEntry]:
    return {
        "claude-opus": PriceEntry(input=5.0, output=25.0, cache_write=6.25, cache_read=0.50),
        "claude-sonnet": PriceEntry(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30),
        "claude-haiku": PriceEntry(input=1.0, output=5.0, cache_write=1.25, cache_read=0.10),
        "gpt-5": PriceEntry(input=1.25, output=10.0, cache_write=0.0, cache_read=0.125),
        "gpt-4o": PriceEntry(input=2.5, output=10.0, cache_write=0.0, cache_read=1.25),
    }


def _ids_as_strings(value: Any) -> Any:
    """Chat ids are numbers on the platforms; people write them quoted or not."""
    if isinstance(value, list):
        return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    return value


def _keys_as_strings(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            str(k) if isinstance(k, int) and not isinstance(k, bool) else k: v
            for k, v in value.items()
        }
    return value


GroupMode: TypeAlias = Literal["mention", "all"]
"""When the bot answers in a group chat (docs/privacy.md)."""


class TelegramConfig(_Section):
    enabled: bool = False
    token: str | None = None
    base_url: str | None = None
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(default=8443, gt=0, lt=65536)
    allowed_users: list[str] = Field(default_factory=list)
    admins: list[str] = Field(default_factory=list)
    """May use /model and answer approvals."""
    tools: list[str] | None = None
    """Tools for this platform's users; None: all enabled but terminal and write_file."""
    user_tools: dict[str, list[str]] = Field(default_factory=dict)
    """Per user id, instead of `tools`."""
    group_mode: GroupMode = "mention"
    """In groups: answer only when mentioned, replied to or sent a command ("mention"), or
    every message ("all"; the bot then needs privacy mode off in BotFather)."""
    group_chats: dict[str, GroupMode] = Field(default_factory=dict)
    """Per group chat id, instead of `group_mode`."""

    _ids = field_validator("allowed_users", "admins", mode="before")(_ids_as_strings)
    _user_ids = field_validator("user_tools", "group_chats", mode="before")(_keys_as_strings)


class DiscordConfig(_Section):
    enabled: bool = False
    token: str | None = None
    allowed_users: list[str] = Field(default_factory=list)
    admins: list[str] = Field(default_factory=list)
    """May use /model and answer approvals."""
    channels: list[str] = Field(default_factory=list)
    """Guild channel ids where the bot answers without being mentioned."""
    group_mode: GroupMode = "mention"
    """In guild channels: answer only when mentioned or replied to ("mention"; slash commands
    always), or every message ("all")."""
    tools: list[str] | None = None
    """Tools for this platform's users; None: all enabled but terminal and write_file."""
    user_tools: dict[str, list[str]] = Field(default_factory=dict)
    """Per user id, instead of `tools`."""

    _ids = field_validator("allowed_users", "admins", "channels", mode="before")(_ids_as_strings)
    _user_ids = field_validator("user_tools", mode="before")(_keys_as_strings)


class HttpKeyConfig(_Section):
    """One named key of the HTTP API: its secret (inline or from the environment), its role
    and its tools."""

    name: str = Field(min_length=1, max_length=64)
    key: str | None = None
    key_env: str | None = None
    """The environment variable holding the key (keeps it out of config.yaml)."""
    role: Literal["user", "admin"] = "user"
    tools: list[str] | None = None
    """None: all enabled tools but terminal and write_file."""

    @model_validator(mode="after")
    def _one_secret(self) -> HttpKeyConfig:
        if (self.key is None) == (self.key_env is None):
            raise ValueError(f"key {self.name!r} needs exactly one of key or key_env")
        return self


class HttpModelRoute(_Section):
    """A model the HTTP API serves under its own name (`gateway.http.models`)."""

    provider: Literal["anthropic", "openai", "openrouter", "custom"] = "anthropic"
    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str | None = None
    """The environment variable with the provider's key; None: the provider's usual one."""


class HttpApiConfig(_Section):
    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(default=8642, gt=0, lt=65536)
    api_key: str | None = None
    """One admin key named "default" (or HERMES_API_KEY); `keys` adds named ones with roles."""
    tools: list[str] | None = None
    """Tools for callers of `api_key`; None: all enabled but terminal and write_file."""
    keys: list[HttpKeyConfig] = Field(default_factory=list)
    cors_origins: list[str] = Field(default_factory=list)
    """Browser origins allowed to call the API (`*` for any); empty: no CORS headers."""
    models: dict[str, HttpModelRoute] = Field(default_factory=dict)
    """Served model name -> the provider and model that answer it."""
    read_timeout_s: float = Field(default=30.0, gt=0)
    """A client's time to send a request's headers (and to idle between requests), and again
    its body; a slower one is cut off."""
    max_connections: int = Field(default=256, gt=0)
    """Open connections beyond this get an immediate 503."""
    user_sessions: bool = False
    """The body's `user` names a session (session mode); off: it is only recorded, and a
    request without `X-Hermes-Session-Id` is stateless (its `messages` are the conversation)."""

    @model_validator(mode="after")
    def _unique_key_names(self) -> HttpApiConfig:
        names = [k.name for k in self.keys]
        if self.api_key is not None:
            names.append("default")
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise ValueError(f"gateway.http.keys: the name {dup!r} is used twice")
        return self


class MetricsConfig(_Section):
    enabled: bool = False
    host: str = "127.0.0.1"
    """Prometheus scrapes `http://host:port/metrics`; it has no authentication, so keep it on
    loopback unless a firewall or proxy guards it."""
    port: int = Field(default=DEFAULT_METRICS_PORT, gt=0, lt=65536)


class PrivacyConfig(_Section):
    """Who can read what (docs/privacy.md): every read on someone's behalf is scoped to the
    sessions they own."""

    admins_read_all: bool = False
    """Admins' tools (session_search, recall, lcm_grep) read every owner's sessions, not only
    their own. Off by default; never in a group chat, whose sessions stay the chat's."""


class GatewayConfig(_Section):
    group_sessions: Literal["per_user", "per_chat"] = "per_user"
    shutdown_timeout_s: float = Field(default=30.0, gt=0)
    max_message_chars: int = Field(default=200_000, gt=0)
    """Longer messages are refused at the door on every platform (and any message that
    would take more than half the model's window)."""
    busy: Literal["queue", "interrupt", "steer"] = "queue"
    """A message sent while its chat's turn runs: queued behind it, interrupting it, or
    steering it (joins the running turn at its next model call); `/busy` changes one chat."""
    telegram: TelegramConfig = TelegramConfig()
    discord: DiscordConfig = DiscordConfig()
    http: HttpApiConfig = HttpApiConfig()
    metrics: MetricsConfig = MetricsConfig()


class HermesConfig(_Section):
    model: ModelConfig = ModelConfig()
    agent: AgentConfig = AgentConfig()
    compression: CompressionConfig = CompressionConfig()
    auxiliary: AuxiliaryConfig = AuxiliaryConfig()
    prompt_caching: PromptCachingConfig = PromptCachingConfig()
    context: ContextConfig = ContextConfig()
    state: StateConfig = StateConfig()
    tools: ToolsConfig = ToolsConfig()
    mcp: McpConfig = McpConfig()
    web: WebConfig = WebConfig()
    memory: MemoryConfig = MemoryConfig()
    logging: LoggingConfig = LoggingConfig()
    pricing: dict[str, PriceEntry] = Field(default_factory=_default_prices)
    gateway: GatewayConfig = GatewayConfig()
    schedule: ScheduleConfig = ScheduleConfig()
    privacy: PrivacyConfig = PrivacyConfig()
    media: MediaConfig = MediaConfig()

    @model_validator(mode="after")
    def _grants_are_enabled_tools(self) -> HermesConfig:
        enabled = set(self.tools.enabled)
        known = (*TOOL_NAMES, *OPTIONAL_TOOL_NAMES)
        unknown = sorted(set(self.tools.enabled) - set(known))
        if unknown:
            raise ValueError(f"tools.enabled: unknown tool {unknown[0]!r}; known: {known}")
        servers = set(self.mcp.servers)
        gw = self.gateway
        grants: list[tuple[str, list[str] | None]] = [
            ("gateway.http.tools", gw.http.tools),
            ("gateway.telegram.tools", gw.telegram.tools),
            ("gateway.discord.tools", gw.discord.tools),
        ]
        for name, section in (("telegram", gw.telegram), ("discord", gw.discord)):
            grants += [(f"gateway.{name}.user_tools.{u}", t) for u, t in section.user_tools.items()]
        grants += [(f"gateway.http.keys.{k.name}.tools", k.tools) for k in gw.http.keys]
        for key, tools in grants:
            for tool in tools or ():
                if tool not in enabled and mcp_server_of_grant(tool) not in servers:
                    raise ValueError(
                        f"{key}: {tool!r} is neither one of tools.enabled {sorted(enabled)} "
                        f"nor mcp:SERVER / SERVER__TOOL of an MCP server {sorted(servers)}"
                    )
        return self


def parse_config(data: Any, *, path: str = "<config>") -> HermesConfig:
    """Validate a loaded YAML mapping; errors name the key, the value and the file."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections", path=path)
    try:
        return HermesConfig.model_validate(data)
    except ValidationError as exc:
        raise _config_error(exc, path) from None


def load_config(path: Path) -> HermesConfig:
    """Read and validate `path`; a missing file means all defaults."""
    if not path.exists():
        return HermesConfig()
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    except YAMLError as exc:
        raise ConfigError(yaml_error_sentence(exc, str(path)), path=str(path)) from None
    return parse_config(data, path=str(path))


def yaml_error_sentence(exc: Exception, path: str) -> str:
    """One sentence for a YAML syntax error: the file, the line and what is wrong there."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f", line {mark.line + 1}" if mark is not None else ""
    return f"{path}{where}: not valid YAML ({problem}); fix that line and try again"


def known_keys(parts: tuple[str, ...] | list[str]) -> list[str] | None:
    """The keys a section at `parts` (e.g. ("compression",)) may hold; None where any key goes
    (a dict such as `pricing`) or the path is no section."""
    model: type[BaseModel] = HermesConfig
    for part in parts:
        field = model.model_fields.get(part)
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return list(model.model_fields)


def did_you_mean(key: str) -> str:
    """` (did you mean 'compression.threshold'?)` for a mistyped dotted key, else ""."""
    import difflib

    parts = key.split(".")
    names = known_keys(parts[:-1])
    if not names:
        return ""
    found = difflib.get_close_matches(parts[-1], names, n=1, cutoff=0.6)
    return f" (did you mean '{'.'.join([*parts[:-1], found[0]])}'?)" if found else ""


def _config_error(exc: ValidationError, path: str) -> ConfigError:
    first = exc.errors()[0]
    key = ".".join(str(p) for p in first["loc"])
    value = first.get("input")
    if first["type"] == "extra_forbidden":
        message = f"{path}: unknown key '{key}'{did_you_mean(key)}"
    elif not first["loc"]:  # a rule across sections; its message names the key
        message = f"{path}: {str(first['msg']).removeprefix('Value error, ')}"
        key = message.split(": ", 2)[1] if message.count(": ") >= 2 else ""
    else:
        shown = "<secret>" if _looks_secret(key) else repr(value)
        message = f"{path}: bad value {shown} for '{key}': {first['msg']}"
    more = len(exc.errors()) - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return ConfigError(message, key=key, path=path)


def _looks_secret(key: str) -> bool:
    return key.endswith(("api_key", "token"))

"""`hermes setup`: pick a provider, check the endpoint and key, detect the model and its window,
and write them to config.yaml (only those lines; everything else in the file stays).

Interactive (prompt_toolkit): Anthropic, OpenAI, OpenRouter or a server on this machine (Ollama,
vLLM, llama.cpp, LM Studio, or any OpenAI-compatible URL). A key in the environment is used as
it is; a typed key is written to config.yaml, which is then readable by its owner only. A
refused key or an unreachable endpoint is said in one sentence and asked again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.config import LOCAL_SERVERS
from agent.errors import HermesError
from cli.endpoint_probe import EndpointProbe, probe_endpoint, probe_sentence

__all__ = ["BASE_URL_ENV", "DEFAULT_MODELS", "SetupChoice", "run_setup"]

DEFAULT_MODELS = {
    "anthropic": "claude-sonnet-4-6",
    "openai": "gpt-5",
    "openrouter": "anthropic/claude-sonnet-4-6",
}
"""What setup offers on a hosted provider when its list does not settle it."""
BASE_URL_ENV = {
    "anthropic": "ANTHROPIC_BASE_URL",
    "openai": "OPENAI_BASE_URL",
    "openrouter": "OPENROUTER_BASE_URL",
}
"""Where setup looks for a relay in front of a hosted API (the SDKs' own variables); a URL
found there is written to model.base_url."""
MAX_TRIES = 3
_KINDS = [
    ("anthropic", "Anthropic (Claude)"),
    ("openai", "OpenAI"),
    ("openrouter", "OpenRouter (many vendors, one key)"),
    ("local", "A model server on this machine (Ollama, vLLM, llama.cpp, LM Studio, …)"),
]
_SERVERS = [
    ("ollama", "Ollama"),
    ("vllm", "vLLM"),
    ("llamacpp", "llama.cpp server"),
    ("lmstudio", "LM Studio"),
    ("custom", "another OpenAI-compatible server"),
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SetupChoice:
    """What setup writes: the config keys and their values."""

    provider: str
    model: str
    base_url: str | None
    api_key: str | None
    """Written only when the person typed it (a key from the environment stays there)."""


async def run_setup(home: Path, environ: Mapping[str, str]) -> int:
    """Ask, probe, write; 0 when config.yaml was written, 1 when the person gave up."""
    try:
        choice = await _ask(environ)
    except (KeyboardInterrupt, EOFError):
        print("Setup stopped; config.yaml is unchanged.")
        return 1
    except HermesError as exc:
        print(f"hermes: {exc}; config.yaml is unchanged.")
        return 1
    path = _write(home, choice)
    print(f"Saved to {path}. Try it: hermes chat   (and `hermes doctor` checks everything)")
    return 0


async def _ask(environ: Mapping[str, str]) -> SetupChoice:
    from agent.providers.registry import API_KEY_ENV

    kind = await _choose("Which model provider?", _KINDS)
    if kind == "local":
        server = await _choose("Which server?", _SERVERS)
        default_url = LOCAL_SERVERS.get(server, "http://127.0.0.1:8000/v1")
        base_url: str | None = await _text("Its OpenAI-compatible URL", default=default_url)
        probe, api_key, typed = await _reach_local(server, base_url or default_url)
        provider, base_url = server, probe.url.removesuffix("/models")
    else:
        provider, variable = kind, API_KEY_ENV[kind]
        base_url = environ.get(BASE_URL_ENV[kind]) or None  # a proxy or relay in front of it
        probe, api_key, typed = await _reach_hosted(kind, base_url, environ.get(variable), variable)
    model = await _pick_model(provider, probe)
    await _show_window(provider, model, base_url, api_key)
    if provider in LOCAL_SERVERS and base_url == LOCAL_SERVERS[provider]:
        base_url = None  # the alias implies it
    return SetupChoice(
        provider=provider, model=model, base_url=base_url, api_key=api_key if typed else None
    )


async def _reach_hosted(
    provider: str, base_url: str | None, env_key: str | None, variable: str
) -> tuple[EndpointProbe, str | None, bool]:
    """The key (the environment's, else typed) and a probe that took it."""
    key, typed = env_key, False
    if key:
        print(f"Using {variable} from the environment.")
    for _ in range(MAX_TRIES):
        if not key:
            key, typed = (await _text(f"{variable} (input hidden)", secret=True)).strip(), True
            if not key:
                raise HermesError(f"no key given; export {variable}=… and run `hermes setup` again")
        probe = await probe_endpoint(provider, base_url, key)
        source = "the key you typed" if typed else f"the key in {variable}"
        print(probe_sentence(probe, key_source=source))
        if probe.kind == "ok":
            return probe, key, typed
        if probe.kind != "auth":
            raise HermesError(f"cannot use {provider} from here; check the network and try again")
        print("Type the key again (it was refused).")
        key = None
    raise HermesError(f"the key was refused {MAX_TRIES} times")


async def _reach_local(server: str, url: str) -> tuple[EndpointProbe, str | None, bool]:
    """A probe of the local server (asking for another URL while it does not answer)."""
    provider = "custom"
    for attempt in range(1, MAX_TRIES + 1):
        probe = await probe_endpoint(provider, url, None)
        print(probe_sentence(probe, key_source="no key"))
        if probe.kind == "ok":
            return probe, None, False
        if probe.kind == "auth":
            key = (await _text("The server wants a key (input hidden)", secret=True)).strip()
            probe = await probe_endpoint(provider, url, key)
            print(probe_sentence(probe, key_source="the key you typed"))
            if probe.kind == "ok":
                return probe, key, True
            continue
        if attempt < MAX_TRIES:
            url = await _text("Another URL (is the server running?)", default=url)
    raise HermesError(f"the {server} server did not answer")


async def _pick_model(provider: str, probe: EndpointProbe) -> str:
    listed = list(probe.models)
    suggested = DEFAULT_MODELS.get(provider)
    if provider in DEFAULT_MODELS:
        default = suggested if suggested in listed or not listed else listed[0]
        return await _text("Model", default=default or "")
    if len(listed) == 1:
        print(f"Model: {listed[0]} (the only one the server has)")
        return listed[0]
    if listed:
        return await _choose("Which model?", [(m, m) for m in listed[:30]])
    return await _text("Model name (the server lists none)", default="")


async def _show_window(
    provider: str, model: str, base_url: str | None, api_key: str | None
) -> None:
    from agent.providers.context_window import resolve_window
    from cli.doctor_cmd import WINDOW_SOURCES

    local = provider not in DEFAULT_MODELS
    window = await resolve_window(model, None, base_url=base_url, api_key=api_key, local=local)
    print(f"Window: {window.tokens:,} tokens ({WINDOW_SOURCES[window.source]})")
    if window.source == "default":
        print("Set model.context_length in config.yaml if you know the model's window.")


def _write(home: Path, choice: SetupChoice) -> Path:
    from cli.config_cmd import config_path, set_key
    from cli.config_edit import render_value

    path = config_path(home)
    values: dict[str, str] = {}  # in an order where each step validates on its own
    if choice.base_url:
        values["model.base_url"] = choice.base_url
    if choice.api_key:
        values["model.api_key"] = choice.api_key
    values |= {"model.default": choice.model, "model.provider": choice.provider}
    for key, value in values.items():
        set_key(path, key, render_value(value))
    if choice.api_key:
        os.chmod(path, 0o600)  # it holds a key now
    return path


async def _choose(message: str, options: list[tuple[str, str]]) -> str:
    from prompt_toolkit.shortcuts.choice_input import ChoiceInput

    return await ChoiceInput[str](message=message, options=options).prompt_async()


async def _text(message: str, *, default: str = "", secret: bool = False) -> str:
    from prompt_toolkit import PromptSession

    shown = f"{message} [{default}]: " if default and not secret else f"{message}: "
    answer = await PromptSession[str]().prompt_async(shown, is_password=secret)
    return answer.strip() or default

"""The window a fake model enforces, and the overflow error each real server answers with.

Servers differ in what they count and how they say it; these are their words, so the runtime's
parsing of a window out of an overflow error is tested against what it will really read:

- Anthropic counts the prompt: 400 `prompt is too long: 215000 tokens > 200000 maximum`.
- OpenAI counts the prompt: 400 `context_length_exceeded`, "This model's maximum context length
  is 128000 tokens. However, your messages resulted in 130000 tokens. ..."
- llama-cpp-python and vLLM count prompt + `max_tokens`: "This model's maximum context length is
  8192 tokens. However, you requested 15109 tokens (11013 in the messages, 4096 in the
  completion). Please reduce the length of the messages or completion."
- llama.cpp's llama-server counts the prompt: `exceed_context_size_error`, "request (4476
  tokens) exceeds the available context size (4096 tokens)", with `n_prompt_tokens`, `n_ctx`.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, assert_never

from sim.llm_server._values import ErrorReply

__all__ = ["OverflowStyle", "overflow_error"]

OverflowStyle: TypeAlias = Literal["anthropic", "openai", "llama_cpp_python", "vllm", "llama_cpp"]


def overflow_error(
    style: OverflowStyle, *, window: int, prompt_tokens: int, body: dict[str, Any]
) -> ErrorReply | None:
    """The error the server `style` answers a request of `prompt_tokens` with, or None."""
    completion = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
    match style:
        case "anthropic":
            if prompt_tokens <= window:
                return None
            message = f"prompt is too long: {prompt_tokens} tokens > {window} maximum"
            return ErrorReply(status=400, type="invalid_request_error", message=message)
        case "openai":
            if prompt_tokens <= window:
                return None
            return ErrorReply(
                status=400,
                type="invalid_request_error",
                param="messages",
                code="context_length_exceeded",
                message=(
                    f"This model's maximum context length is {window} tokens. However, your "
                    f"messages resulted in {prompt_tokens} tokens. Please reduce the length of "
                    "the messages."
                ),
            )
        case "llama_cpp_python" | "vllm":
            requested = prompt_tokens + completion
            if requested <= window:
                return None
            return ErrorReply(
                status=400,
                type="invalid_request_error",
                message=(
                    f"This model's maximum context length is {window} tokens. However, you "
                    f"requested {requested} tokens ({prompt_tokens} in the messages, "
                    f"{completion} in the completion). Please reduce the length of the "
                    "messages or completion."
                ),
            )
        case "llama_cpp":
            if prompt_tokens <= window:
                return None
            return ErrorReply(
                status=400,
                type="exceed_context_size_error",
                code="400",
                message=(
                    f"request ({prompt_tokens} tokens) exceeds the available context size "
                    f"({window} tokens), try increasing it"
                ),
            )
        case unreachable:
            assert_never(unreachable)

"""OpenAI/Codex-specific context management: gpt-5.5 autoraise, native Responses compaction
gate, and the Codex app-server runtime (provider and context engine). No SDK is imported here."""

from __future__ import annotations

from agent.codex.app_server import (
    DEFAULT_APP_SERVER_COMMAND,
    CodexAppServerProvider,
    ThreadCompaction,
    new_user_text,
)
from agent.codex.app_server_engine import CodexAppServerEngine, boundary_record, should_initiate
from agent.codex.autoraise import (
    AUTORAISE_THRESHOLD,
    autoraised_threshold,
    is_codex_gpt55,
    notice_for_autoraise,
)
from agent.codex.native_compaction import (
    endpoint_of,
    is_native_model,
    is_native_route,
    native_compaction_field,
)

__all__ = [
    "AUTORAISE_THRESHOLD",
    "DEFAULT_APP_SERVER_COMMAND",
    "CodexAppServerEngine",
    "CodexAppServerProvider",
    "ThreadCompaction",
    "autoraised_threshold",
    "boundary_record",
    "endpoint_of",
    "is_codex_gpt55",
    "is_native_model",
    "is_native_route",
    "native_compaction_field",
    "new_user_text",
    "notice_for_autoraise",
    "should_initiate",
]

"""OpenAI/Codex-specific context management: gpt-5.5 autoraise (`autoraise`), native Responses
compaction gate (`native_compaction`), and the Codex app-server runtime (`app_server`,
`app_server_engine`). No SDK is imported here.

Import the submodule you need: the package re-exports nothing, so the threshold maths every
session uses does not load the app-server runtime (a JSON-RPC client over stdio) with it.
"""

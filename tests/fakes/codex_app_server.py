"""A fake `codex app-server`: the JSON-RPC (JSONL over stdio) protocol, stdlib only.

Run it as `python -m tests.fakes.codex_app_server` or by file path. It implements the handshake
(`initialize` + `initialized`, other requests before it fail "Not initialized"), `thread/start`,
`turn/start` (streams an echo reply as `item/agentMessage/delta`, then `item/completed`,
`thread/tokenUsage/updated`, `turn/completed`), `thread/compact/start` (returns `{}` at once,
then runs a compaction turn with a `contextCompaction` item) and `turn/interrupt`.

Options: `--log PATH` appends every received message as a JSON line; `--hang-on METHOD` never
answers that method; `--native-compact-every N` compacts on its own in every Nth turn;
`--compact-delay S` stretches the compaction turn; `--delta-delay S` paces reply deltas; `--fail-turn INFO` fails turns with that
`codexErrorInfo`; `--linger` ignores stdin EOF (so only a kill ends it).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

BASE_TOKENS = 100
"""Thread tokens right after a compaction."""


class FakeCodex:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.initialized = False
        self.threads: dict[str, int] = {}
        """thread id -> current context tokens."""
        self.turns = 0
        self.ids = 0
        self.lock = threading.Lock()

    def next_id(self, prefix: str) -> str:
        self.ids += 1
        return f"{prefix}_{self.ids}"

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"method": method, "params": params})

    def log(self, message: dict[str, Any]) -> None:
        if self.args.log:
            with open(self.args.log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(message) + "\n")

    def handle(self, message: dict[str, Any]) -> None:
        self.log(message)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method is None or method in (self.args.hang_on or ()):
            return
        if request_id is None:
            if method == "initialized":
                self.initialized = True
            return
        if method != "initialize" and not self.initialized:
            self.send({"id": request_id, "error": {"code": -32600, "message": "Not initialized"}})
            return
        handlers: dict[str, Callable[[Any, dict[str, Any]], None]] = {
            "initialize": self.initialize,
            "thread/start": self.thread_start,
            "turn/start": self.turn_start,
            "thread/compact/start": self.compact_start,
            "turn/interrupt": self.interrupt,
        }
        handler = handlers.get(method)
        if handler is None:
            self.send({"id": request_id, "error": {"code": -32601, "message": f"unknown {method}"}})
            return
        handler(request_id, params)

    def interrupt(self, request_id: Any, params: dict[str, Any]) -> None:
        self.send({"id": request_id, "result": {}})

    def initialize(self, request_id: Any, params: dict[str, Any]) -> None:
        self.send({"id": request_id, "result": {"userAgent": "fake-codex/0.0.1"}})

    def thread_start(self, request_id: Any, params: dict[str, Any]) -> None:
        thread_id = self.next_id("thr")
        self.threads[thread_id] = BASE_TOKENS
        thread = {"id": thread_id, "preview": "", "modelProvider": "openai", "createdAt": 0}
        self.send({"id": request_id, "result": {"thread": thread, "model": params.get("model")}})
        self.notify("thread/started", {"thread": thread})

    def turn_start(self, request_id: Any, params: dict[str, Any]) -> None:
        thread_id = params["threadId"]
        if thread_id not in self.threads:
            self.send({"id": request_id, "error": {"code": -32600, "message": "thread not found"}})
            return
        self.turns += 1
        turn_id = self.next_id("turn")
        text = "".join(part.get("text", "") for part in params.get("input") or ())
        turn: dict[str, Any] = {"id": turn_id, "status": "inProgress", "items": [], "error": None}
        self.send({"id": request_id, "result": {"turn": turn}})
        self.notify("turn/started", {"threadId": thread_id, "turn": turn})
        if self.args.fail_turn:
            error = {"message": "turn failed", "codexErrorInfo": self.args.fail_turn}
            self.notify(
                "error",
                {"threadId": thread_id, "turnId": turn_id, "error": error, "willRetry": False},
            )
            done = {**turn, "status": "failed", "error": error}
            self.notify("turn/completed", {"threadId": thread_id, "turn": done})
            return
        every = self.args.native_compact_every
        if every and self.turns % every == 0:
            self.compaction_items(thread_id, turn_id)
        reply = f"echo: {text}"
        item_id = self.next_id("msg")
        ctx = {"threadId": thread_id, "turnId": turn_id}
        self.notify(
            "item/started", {**ctx, "item": {"type": "agentMessage", "id": item_id, "text": ""}}
        )
        for word in reply.split(" "):
            piece = word if word == reply.split(" ")[-1] else word + " "
            time.sleep(self.args.delta_delay)
            self.notify("item/agentMessage/delta", {**ctx, "itemId": item_id, "delta": piece})
        self.notify(
            "item/completed",
            {**ctx, "item": {"type": "agentMessage", "id": item_id, "text": reply}},
        )
        self.threads[thread_id] += (len(text) + len(reply) + 3) // 4 + 200
        self.usage(thread_id, turn_id, output=(len(reply) + 3) // 4)
        self.notify(
            "turn/completed", {"threadId": thread_id, "turn": {**turn, "status": "completed"}}
        )

    def compact_start(self, request_id: Any, params: dict[str, Any]) -> None:
        thread_id = params["threadId"]
        self.send({"id": request_id, "result": {}})
        turn_id = self.next_id("turn")
        turn: dict[str, Any] = {"id": turn_id, "status": "inProgress", "items": [], "error": None}
        self.notify("turn/started", {"threadId": thread_id, "turn": turn})
        self.compaction_items(thread_id, turn_id)
        self.usage(thread_id, turn_id, output=0)
        self.notify(
            "turn/completed", {"threadId": thread_id, "turn": {**turn, "status": "completed"}}
        )

    def compaction_items(self, thread_id: str, turn_id: str) -> None:
        item = {"type": "contextCompaction", "id": self.next_id("cmp")}
        ctx = {"threadId": thread_id, "turnId": turn_id}
        self.notify("item/started", {**ctx, "item": item})
        time.sleep(self.args.compact_delay)
        self.threads[thread_id] = BASE_TOKENS
        self.notify("item/completed", {**ctx, "item": item})
        self.notify("thread/compacted", ctx)  # the deprecated twin of the item

    def usage(self, thread_id: str, turn_id: str, *, output: int) -> None:
        tokens = self.threads[thread_id]
        last = {
            "totalTokens": tokens + output,
            "inputTokens": tokens,
            "cachedInputTokens": tokens // 2,
            "cacheWriteInputTokens": 0,
            "outputTokens": output,
            "reasoningOutputTokens": 0,
        }
        usage = {"total": last, "last": last, "modelContextWindow": 272_000}
        self.notify(
            "thread/tokenUsage/updated",
            {"threadId": thread_id, "turnId": turn_id, "tokenUsage": usage},
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log")
    parser.add_argument("--hang-on", action="append")
    parser.add_argument("--native-compact-every", type=int, default=0)
    parser.add_argument("--compact-delay", type=float, default=0.0)
    parser.add_argument("--delta-delay", type=float, default=0.0)
    parser.add_argument("--fail-turn")
    parser.add_argument("--linger", action="store_true")
    fake = FakeCodex(parser.parse_args(argv))
    for line in sys.stdin:
        if line.strip():
            fake.handle(json.loads(line))
    while fake.args.linger:
        time.sleep(60)


if __name__ == "__main__":
    main()

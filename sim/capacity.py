"""The model server's capacity on the simulated clock: one slot served first come, first served.

A local server (llama.cpp with one slot, Ollama with `OLLAMA_NUM_PARALLEL=1`, one MLX process)
answers one request at a time and queues the others in arrival order. `OneSlot` is that queue:
`async with slot.held():` waits for the slot (time passes on the simulated clock meanwhile, the
holder's modeled seconds), holds it while the call is served and hands it to the next caller in
line. A caller cancelled while waiting leaves the line; one cancelled while served frees the
slot at that moment (the server stops generating when the client hangs up). `Unlimited` never
makes anyone wait (separate capacity: a hosted API).

Handing the slot over takes one or two event-loop iterations and no tracked operation, well
inside the pump's quiet rule (`sim.simclock.POLLS`), so the next holder's call starts at the
instant the previous one ended.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator
from typing import Protocol

from sim.simclock import Activity

__all__ = ["Capacity", "OneSlot", "Unlimited"]


class Capacity(Protocol):
    """Where a model call waits for the server before it is served."""

    def held(self) -> contextlib.AbstractAsyncContextManager[None]: ...


class Unlimited:
    """Every call is served the moment it is made."""

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        yield


class OneSlot:
    """One request at a time, the others in arrival order."""

    def __init__(self, activity: Activity | None = None) -> None:
        self._activity = activity or Activity()
        self._busy = False
        self._line: deque[asyncio.Future[None]] = deque()

    @property
    def busy(self) -> bool:
        return self._busy

    @property
    def waiting(self) -> int:
        return sum(1 for f in self._line if not f.done())

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        await self._acquire()
        try:
            yield
        finally:
            self._release()

    async def _acquire(self) -> None:
        if not self._busy and not self._line:
            self._busy = True
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._line.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._release()  # handed the slot as it was cancelled: pass it on
            else:
                self._line.remove(turn)
            raise

    def _release(self) -> None:
        while self._line:
            turn = self._line.popleft()
            if not turn.done():
                turn.set_result(None)  # the slot goes to the next in line, still busy
                self._activity.bump()
                return
        self._busy = False
        self._activity.bump()

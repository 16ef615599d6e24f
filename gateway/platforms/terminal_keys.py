"""The terminal chat's keys: editing at the prompt, and stopping a reply while it runs.

At the prompt, Alt-Enter inserts a newline (Shift-Enter too, where the terminal reports it as
its own key: xterm's modifyOtherKeys and the CSI-u form kitty, foot and WezTerm send); Ctrl-C
clears a line that has text and, on an empty one, raises `KeyboardInterrupt` so the chat can
ask for a second press. While a reply runs, `watch_turn_keys` reads the same input in raw mode:
Esc or Ctrl-C stops the turn (and SIGINT, for the moments the terminal is not in raw mode).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator

from prompt_toolkit.input import Input
from prompt_toolkit.input.ansi_escape_sequences import ANSI_SEQUENCES
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys

__all__ = ["SHIFT_ENTER_SEQUENCES", "prompt_key_bindings", "watch_turn_keys"]

SHIFT_ENTER_SEQUENCES = ("\x1b[27;2;13~", "\x1b[13;2u")
"""Shift-Enter as xterm (modifyOtherKeys) and CSI-u terminals send it."""

# prompt_toolkit's escape-sequence table is module state, read when input is parsed: Shift-Enter
# becomes Alt-Enter (prompt_toolkit maps the xterm form to plain Enter, which would send).
for _sequence in SHIFT_ENTER_SEQUENCES:
    ANSI_SEQUENCES[_sequence] = (Keys.Escape, Keys.ControlM)


def prompt_key_bindings() -> KeyBindings:
    """Alt-Enter: newline; Ctrl-C: clear the line, or on an empty line, KeyboardInterrupt."""
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt())

    return bindings


@contextlib.contextmanager
def watch_turn_keys(source: Input | None, on_stop: Callable[[], None]) -> Iterator[None]:
    """While the body runs, Esc or Ctrl-C typed on `source` (and SIGINT) call `on_stop`.

    `source` is put in raw mode (no echo, Ctrl-C arrives as a key); None watches SIGINT only,
    for input that is not a person at a keyboard (a pipe must keep its lines for the prompt).
    """
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGINT)
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, on_stop)
    try:
        if source is None:
            yield
            return

        def on_keys() -> None:
            keys = source.read_keys() + source.flush_keys()  # a lone Esc is complete at once
            if any(k.key in (Keys.Escape, Keys.ControlC) for k in keys):
                on_stop()

        with source.raw_mode(), source.attach(on_keys):
            yield
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            if loop.remove_signal_handler(signal.SIGINT) and previous is not None:
                signal.signal(signal.SIGINT, previous)  # e.g. asyncio.run's own handler

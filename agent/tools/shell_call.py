"""What a shell-policy rule sees and returns: a `Call` (one program and its words) and `Finding`s."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeAlias

from agent.tools.approval import RiskLevel
from agent.tools.shell_parse import Word
from agent.tools.workspace import PathClass

__all__ = ["Call", "Finding", "Rule", "Scope"]


class Scope(Protocol):
    """What rules may ask of the command line being judged (`shell_policy` supplies it)."""

    def where(self, word: Word) -> PathClass | None: ...
    def in_home(self, word: Word) -> bool: ...
    def check_write(self, word: Word, verb: str) -> list[Finding]: ...
    def assess_words(self, words: list[Word], *, extra_input: bool) -> list[Finding]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One thing the policy noticed, and how bad it is."""

    level: RiskLevel
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """One program about to run, after its wrappers were stripped."""

    name: str
    """The program's base name (`rm` for `/bin/rm`)."""
    path: str
    args: tuple[Word, ...]
    scope: Scope
    piped_in: bool = False
    inline_input: bool = False
    extra_input: bool = False
    """More arguments arrive at run time (`xargs`, `find -exec … +`)."""

    def values(self) -> list[str | None]:
        return [w.value for w in self.args]


Rule: TypeAlias = Callable[[Call], list[Finding]]

"""Whether a standing instruction is about the person or about the task: a pure, cautious rule.

"Always answer in German", "call me Sam", "keep your answers short" describe how this person
wants to be talked to, in every conversation: they are offered to the profile. "Never push to
main", "use tabs, not spaces" are about the work at hand and stay in the session's ledger. An
instruction that mentions the work (code, files, tests, commits, ...) is never about the person.
"""

from __future__ import annotations

import re

__all__ = ["is_about_person"]

_LANGUAGES = (
    "english|german|deutsch|french|spanish|italian|portuguese|dutch|polish|russian|ukrainian|"
    "japanese|chinese|mandarin|korean|arabic|hebrew|turkish|greek|swedish|norwegian|danish|"
    "finnish|czech|hindi"
)
_PERSON_RE = re.compile(
    r"\b(?:answer|reply|respond|write|talk|speak|explain|address)\w*\s+(?:to\s+)?(?:me|in)\b"
    r"|\bcall me\b|\bmy name\b|\bname is\b"
    r"|\b(?:answers|replies|responses|messages to me)\b"
    rf"|\bin (?:{_LANGUAGES})\b"
    r"|\b(?:metric|imperial|celsius|fahrenheit|24-hour|12-hour|time ?zone)\b"
    r"|\b(?:emojis?|formal|informal|casual|jargon)\b",
    re.I,
)
_TASK_RE = re.compile(
    r"\b(?:code|coding|file|files|test|tests|commit|commits|branch|merge|push|pull request|PR|"
    r"function|functions|class|variable|indent\w*|tabs?|spaces|lint\w*|build|deploy\w*|"
    r"database|schema|api|endpoint|repo\w*|docs?|documentation|comment|comments|script|"
    r"library|package|dependency|dependencies|server|config\w*|log|logs)\b",
    re.I,
)


def is_about_person(instruction: str) -> bool:
    """True for an instruction about how this person wants to be answered or addressed."""
    return bool(_PERSON_RE.search(instruction)) and not _TASK_RE.search(instruction)

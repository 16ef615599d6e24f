"""Recognise destructive shell commands and decide whether they may run: pure functions over text.

`classify_command` tokenises a command line the way a POSIX shell would (quotes, operators,
`$(...)`, backticks, `<(...)`), strips wrappers such as `sudo` or `env`, looks into `sh -c` and
`eval` strings, and checks every simple command and pipeline against a short list of rules. It is
a guard rail against accidents, not a sandbox: it errs towards flagging, and a determined caller can
always hide intent from a static check.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ApprovalAction",
    "DangerVerdict",
    "approval_action",
    "classify_command",
    "classify_write_path",
]

ApprovalAction = Literal["run", "refuse", "ask"]

_MAX_DEPTH = 4
_PLACEHOLDER = "__HERMES_SUB_{}__"
_PLACEHOLDER_RE = re.compile(r"__HERMES_SUB_(\d+)__")

_SYSTEM_DIRS = frozenset(
    "/ /bin /boot /dev /etc /home /lib /lib32 /lib64 /opt /proc /root /sbin /srv /sys /usr /var"
    " /usr/bin /usr/lib /usr/local /usr/sbin /usr/share /var/lib /var/log".split()
)
_HOME_TARGETS = frozenset({"~", "$HOME", "${HOME}"})
_CRITICAL_FILES = frozenset(
    "/etc/passwd /etc/shadow /etc/group /etc/gshadow /etc/sudoers /etc/fstab /etc/hosts"
    " /etc/crontab /boot/grub/grub.cfg".split()
)
_BLOCK_DEVICE_RE = re.compile(
    r"^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|md\d|dm-\d|disk\d|mapper/|loop\d)"
)
_SHELLS = frozenset({"sh", "bash", "zsh", "ksh", "dash", "fish", "ash", "csh", "tcsh"})
_INTERPRETERS = frozenset({"python", "python3", "perl", "ruby", "node", "php"})
_FETCHERS = frozenset({"curl", "wget", "fetch"})
_POWER = frozenset({"shutdown", "reboot", "halt", "poweroff"})
_KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "}", "time"})
_WRAPPERS = frozenset({"nohup", "command", "exec", "builtin", "nice", "ionice", "stdbuf", "doas"})
_SUDO_ARG_OPTS = frozenset({"-u", "-g", "-C", "-h", "-p", "-r", "-t", "-U", "-D", "-R"})
_GLOB_ALL = frozenset({"*", "./*", ".*", "./.*"})
_FORK_BOMB_RE = re.compile(r"([A-Za-z_:][\w:.]*)\(\)\{[^}]*\1\|\1&")


@dataclass(frozen=True, slots=True, kw_only=True)
class DangerVerdict:
    """Whether a command is destructive, and in a few words why."""

    dangerous: bool
    reason: str | None = None


def classify_command(command: str) -> DangerVerdict:
    """Classify one shell command line; `reason` names the first destructive thing found."""
    reason = _classify(command, depth=0)
    return DangerVerdict(dangerous=reason is not None, reason=reason)


def classify_write_path(path: str) -> DangerVerdict:
    """Whether writing a file at `path` (already absolute) would damage the system."""
    reason = _redirect_reason(path)
    return DangerVerdict(dangerous=reason is not None, reason=reason)


def approval_action(verdict: DangerVerdict, *, policy: str, has_approver: bool) -> ApprovalAction:
    """What to do with a command: run it, refuse it, or ask a person first."""
    if not verdict.dangerous or policy == "allow":
        return "run"
    if policy == "ask" and has_approver:
        return "ask"
    return "refuse"


# ---------------------------------------------------------------------------------------------
# tokenising


def _classify(command: str, *, depth: int) -> str | None:
    if depth > _MAX_DEPTH:
        return None
    if _FORK_BOMB_RE.search(re.sub(r"\s+", "", _strip_quoted(command))):
        return "fork bomb"
    text, bodies = _extract_substitutions(command)
    for body in bodies:
        if reason := _classify(body, depth=depth + 1):
            return reason
    for pipeline in _pipelines(_tokenise(text)):
        if reason := _check_pipeline(pipeline, bodies, depth=depth):
            return reason
    return None


def _strip_quoted(text: str) -> str:
    """The text with the inside of quoted strings removed (for shape-only checks)."""
    return re.sub(r"'[^']*'|\"(?:\\.|[^\"\\])*\"", "''", text)


def _extract_substitutions(command: str) -> tuple[str, list[str]]:
    """Replace `$(...)`, `<(...)`, `>(...)` and backticks with placeholders; return the bodies."""
    out: list[str] = []
    bodies: list[str] = []
    i, quote = 0, ""
    while i < len(command):
        ch = command[i]
        if ch == "'" and quote != '"':
            quote = "" if quote == "'" else "'"
        elif ch == '"' and quote != "'":
            quote = "" if quote == '"' else '"'
        elif quote != "'" and ch in "$<>" and command[i + 1 : i + 2] == "(":
            end = _matching_paren(command, i + 1)
            bodies.append(command[i + 2 : end])
            out.append(_PLACEHOLDER.format(len(bodies) - 1))
            i = end + 1
            continue
        elif quote != "'" and ch == "`":
            end = command.find("`", i + 1)
            end = len(command) if end < 0 else end
            bodies.append(command[i + 1 : end])
            out.append(_PLACEHOLDER.format(len(bodies) - 1))
            i = end + 1
            continue
        out.append(ch)
        i += 1
    return "".join(out), bodies


def _matching_paren(text: str, open_at: int) -> int:
    level = 0
    for j in range(open_at, len(text)):
        if text[j] == "(":
            level += 1
        elif text[j] == ")":
            level -= 1
            if level == 0:
                return j
    return len(text)


def _tokenise(text: str) -> list[str]:
    text = text.replace("\n", " ; ")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: fall back to a rough split, erring towards flagging
        return re.findall(r"[^\s;&|()<>'\"]+|[;&|()<>]+", text)


def _is_operator(token: str) -> bool:
    return bool(token) and all(c in "();<>|&" for c in token)


def _pipelines(tokens: Sequence[str]) -> Iterator[list[list[str]]]:
    """Split tokens into pipelines of simple commands (each a token list with redirections)."""
    pipeline: list[list[str]] = []
    current: list[str] = []
    for token in tokens:
        if not _is_operator(token) or ">" in token or "<" in token:
            current.append(token)
        elif "|" in token and token != "||":
            pipeline.append(current)
            current = []
        else:
            pipeline.append(current)
            yield [c for c in pipeline if c]
            pipeline, current = [], []
    pipeline.append(current)
    if any(pipeline):
        yield [c for c in pipeline if c]


# ---------------------------------------------------------------------------------------------
# rules


def _check_pipeline(pipeline: list[list[str]], bodies: list[str], *, depth: int) -> str | None:
    fetched = False
    for stage in pipeline:
        argv, targets = _split_redirects(stage)
        for target in targets:
            if reason := _redirect_reason(target):
                return reason
        argv = _strip_wrappers(argv)
        if not argv:
            continue
        name = argv[0].rsplit("/", 1)[-1]
        if fetched and _reads_script_from_stdin(name, argv[1:]):
            return "pipes a downloaded script into a shell"
        fetched = fetched or name in _FETCHERS
        if reason := _command_reason(name, argv[1:], bodies, depth=depth):
            return reason
    return None


def _split_redirects(stage: list[str]) -> tuple[list[str], list[str]]:
    argv: list[str] = []
    targets: list[str] = []
    tokens = iter(stage)
    for token in tokens:
        if _is_operator(token) and ">" in token:
            target = next(tokens, "")
            if not target.isdigit() and target != "-":
                targets.append(target)
        elif _is_operator(token):
            next(tokens, None)  # input redirection: skip the source
        else:
            argv.append(token)
    return argv, targets


def _strip_wrappers(argv: list[str]) -> list[str]:
    """Drop `sudo -u x`, `env A=b`, `nohup`, `timeout 5`, shell keywords and assignments."""
    i = 0
    while i < len(argv):
        word = argv[i]
        base = word.rsplit("/", 1)[-1]
        if word in _KEYWORDS or base in _WRAPPERS or _is_assignment(word):
            i += 1
        elif base in ("sudo", "env"):
            i += 1
            while i < len(argv) and (argv[i].startswith("-") or _is_assignment(argv[i])):
                i += 2 if argv[i] in _SUDO_ARG_OPTS else 1
        elif base == "timeout":
            i += 1
            while i < len(argv) and argv[i].startswith("-"):
                i += 1
            i += 1  # the duration
        else:
            break
    return argv[i:]


def _is_assignment(word: str) -> bool:
    return re.fullmatch(r"[A-Za-z_]\w*=.*", word) is not None


def _command_reason(name: str, args: list[str], bodies: list[str], *, depth: int) -> str | None:
    if name == "rm":
        return _rm_reason(args)
    if name.startswith("mkfs") or name in ("mke2fs", "wipefs"):
        return f"formats or wipes a filesystem ({name})"
    if name == "dd":
        return _dd_reason(args)
    if name in ("chmod", "chown", "chgrp"):
        return _recursive_system_reason(name, args)
    if name == "find":
        return _find_reason(args)
    if name == "tee":
        return next(filter(None, map(_redirect_reason, args)), None)
    if name in ("cp", "mv", "install") and args:
        return _redirect_reason(args[-1])
    if name in _POWER and "-c" not in args and "--help" not in args:
        return f"shuts down or reboots the machine ({name})"
    if name == "systemctl" and set(args) & {"poweroff", "reboot", "halt", "kexec"}:
        return "shuts down or reboots the machine (systemctl)"
    if name in ("init", "telinit") and set(args) & {"0", "6"}:
        return f"shuts down or reboots the machine ({name})"
    return _executor_reason(name, args, bodies, depth=depth)


def _executor_reason(name: str, args: list[str], bodies: list[str], *, depth: int) -> str | None:
    """Commands that run text as code: `sh -c`, `eval`, `source`; look inside their input."""
    if name not in _SHELLS and name not in ("eval", "source", ".", "su"):
        return None
    for arg in args:
        for index in _PLACEHOLDER_RE.findall(arg):
            if _mentions_fetch(bodies[int(index)]):
                return "runs a downloaded script"
    script = _script_argument(name, args)
    return _classify(script, depth=depth + 1) if script else None


def _script_argument(name: str, args: list[str]) -> str | None:
    if name == "eval":
        return " ".join(args)
    if "-c" in args:
        position = args.index("-c") + 1
        return args[position] if position < len(args) else None
    for arg in args:  # combined flags such as `bash -xc "..."`
        if re.fullmatch(r"-[a-z]*c[a-z]*", arg) and not arg.startswith("--"):
            position = args.index(arg) + 1
            return args[position] if position < len(args) else None
    return None


def _mentions_fetch(text: str) -> bool:
    return re.search(r"(^|[\s;&|(`])(\S*/)?(curl|wget|fetch)\b", text) is not None


def _reads_script_from_stdin(name: str, args: list[str]) -> bool:
    """A shell or interpreter at the end of a pipe that runs what it reads."""
    if name in _SHELLS:
        return _script_argument(name, args) is None
    if name.rstrip("0123456789.") in _INTERPRETERS:
        positional = [a for a in args if not a.startswith("-") or a == "-"]
        return not ({"-c", "-m", "-e"} & set(args)) and (not positional or positional[0] == "-")
    return False


def _rm_reason(args: list[str]) -> str | None:
    flags, paths = _flags_and_operands(args)
    if not any(f == "--recursive" or (f[1:2] != "-" and "r" in f.lower()) for f in flags):
        return None
    for path in paths:
        if _is_root_like(path) or _is_home(path) or path.strip() in _GLOB_ALL:
            return f"recursive delete of {path}"
    return None


def _dd_reason(args: list[str]) -> str | None:
    for arg in args:
        if arg.startswith("of=") and _BLOCK_DEVICE_RE.match(arg[3:]):
            return f"writes raw data to block device {arg[3:]}"
    return None


def _recursive_system_reason(name: str, args: list[str]) -> str | None:
    flags, paths = _flags_and_operands(args)
    if not any(f == "--recursive" or (not f.startswith("--") and "R" in f) for f in flags):
        return None
    for path in paths:
        if _is_root_like(path):
            return f"recursive {name} on {path}"
    return None


def _find_reason(args: list[str]) -> str | None:
    first_option = next((i for i, a in enumerate(args) if a.startswith("-")), len(args))
    starts = args[:first_option]
    deletes = "-delete" in args or any(
        a in ("-exec", "-execdir") and i + 1 < len(args) and args[i + 1].endswith("rm")
        for i, a in enumerate(args)
    )
    if deletes and any(_is_root_like(p) or _is_home(p) for p in starts):
        return "deletes files under a system directory with find"
    return None


def _redirect_reason(target: str) -> str | None:
    path = _normalise(target)
    if _BLOCK_DEVICE_RE.match(path):
        return f"writes to block device {path}"
    if path in _CRITICAL_FILES or path.startswith("/boot/"):
        return f"overwrites {path}"
    return None


def _flags_and_operands(args: list[str]) -> tuple[list[str], list[str]]:
    if "--" in args:
        cut = args.index("--")
        return [a for a in args[:cut] if a.startswith("-")], args[cut + 1 :]
    return [a for a in args if a.startswith("-")], [a for a in args if not a.startswith("-")]


def _normalise(path: str) -> str:
    path = re.sub(r"/+", "/", path.strip())
    while path.endswith(("/.", "/*")):
        path = path[:-2] or "/"
    return path.rstrip("/") or ("/" if path.startswith("/") else path)


def _is_root_like(path: str) -> bool:
    return _normalise(path) in _SYSTEM_DIRS


def _is_home(path: str) -> bool:
    return _normalise(path) in _HOME_TARGETS

"""The shell policy: judge a command line by what it would run, from its syntax tree.

`assess_command` parses the command with tree-sitter-bash (`shell_parse`), strips wrappers
(`sudo`, `env`, `nice -n 5`, `timeout 10`, `xargs -0`, `busybox`, …) with their options, and
checks every simple command against `shell_rules`. The verdict's level is the worst finding:

- safe: every program is on the allowlist and is used harmlessly;
- unlisted: a program the allowlist does not know (runs where someone could approve);
- opaque: something the policy cannot see through: a computed command name (`$x`, `$(…)`),
  `eval`, `-c`/`-e` to an interpreter, a pipe, here-document or here-string into one, a write
  whose target is unknown, an assignment to PATH or LD_PRELOAD, a private file, text that does
  not parse;
- destructive: recursive or forced deletes, `git reset --hard`, `git clean -f`, `git push
  --force`, truncation, in-place edits, moves and writes outside the workspace, process kills,
  crontab, persistence files, root.

`agent.tools.approval.decide_action` turns the level into run, ask or refuse.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import assert_never

from agent.tools.approval import RiskLevel
from agent.tools.shell_call import Call, Finding
from agent.tools.shell_parse import Redirect, SimpleCommand, Word, parse_script
from agent.tools.shell_rules import SAFE_PROGRAMS, rule_for, unwrap
from agent.tools.workspace import PathClass, Workspace

__all__ = ["ShellVerdict", "assess_command"]

_RANK: dict[RiskLevel, int] = {"safe": 0, "unlisted": 1, "opaque": 2, "destructive": 3}
_LOADER_VARIABLES = frozenset(
    "PATH LD_PRELOAD LD_LIBRARY_PATH LD_AUDIT BASH_ENV ENV PROMPT_COMMAND IFS SHELLOPTS BASHOPTS"
    " PS4 NODE_OPTIONS PERL5OPT PERL5LIB RUBYOPT PYTHONSTARTUP PYTHONHOME GIT_SSH_COMMAND"
    " GIT_SSH GIT_EXTERNAL_DIFF GIT_PAGER PAGER EDITOR VISUAL GIT_EDITOR GIT_CONFIG_GLOBAL"
    " GIT_CONFIG_SYSTEM GIT_EXEC_PATH GIT_ASKPASS SSH_ASKPASS LESSOPEN MANPAGER".split()
)
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
_SYSTEM_BIN = ("/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/usr/local/bin/", "/usr/local/sbin/")
_GLOB = re.compile(r"[*?\[]")
_PROC_SECRET_TEXT = re.compile(r"/proc/.*/(environ|mem|root|cwd|fd|map_files)\b")
_PROC_PROCESS = re.compile(r"^/proc/(?!(sys|net|cpuinfo|meminfo|version|loadavg|uptime)\b)[^/]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class ShellVerdict:
    """The policy's view of one command line."""

    level: RiskLevel
    reasons: tuple[str, ...] = ()
    """What made it that level, worst first."""

    @property
    def reason(self) -> str:
        return self.reasons[0] if self.reasons else "allowed"


def assess_command(command: str, *, cwd: Path, workspace: Workspace) -> ShellVerdict:
    """Parse `command` and judge every command it would run (see the module docstring)."""
    script = parse_script(command, env={"HOME": str(workspace.home)})
    scope = _Scope(workspace=workspace, cwds=[cwd], functions=script.functions)
    findings = [Finding(level="opaque", reason=p) for p in script.problems]
    for redirect in script.group_redirects:
        findings += scope.check_redirect(redirect)
    for simple in script.commands:
        findings += scope.assess(simple)
    if not findings:
        return ShellVerdict(level="safe")
    worst = sorted(findings, key=lambda f: -_RANK[f.level])
    reasons = tuple(dict.fromkeys(f.reason for f in worst if f.level == worst[0].level))
    return ShellVerdict(level=worst[0].level, reasons=reasons)


@dataclass(slots=True, kw_only=True)
class _Scope:
    """What is known while walking one command line: the workspace and the possible cwds."""

    workspace: Workspace
    cwds: list[Path | None]
    """Every directory the next command may run in (`cd` adds one; None: unknown)."""
    functions: frozenset[str] = frozenset()
    _seen_cd: bool = field(default=False)

    def assess(self, simple: SimpleCommand, *, extra_input: bool = False) -> list[Finding]:
        findings = self._assignments(simple.assignments)
        for redirect in simple.redirects:
            findings += self.check_redirect(redirect)
        if not simple.words:
            return findings
        argv, wrapped, more_input = unwrap(list(simple.words))
        findings += wrapped
        for name, word in _env_assignments(list(simple.words), argv):
            findings += self._assignments(((name, word),))
        if not argv:
            return findings
        head = argv[0]
        if head.value is None or (not head.quoted and _GLOB.search(head.value)):
            return [*findings, _opaque(f"the command name is computed ({head.text})")]
        call = Call(
            name=_program_name(head.value),
            path=head.value,
            args=tuple(argv[1:]),
            scope=self,
            piped_in=simple.piped_in,
            inline_input=simple.inline_input,
            extra_input=extra_input or more_input,
        )
        findings += self._program(call)
        findings += [f for w in call.args if (f := self._private_argument(w)) is not None]
        if call.name in ("cd", "pushd", "popd"):
            findings += _into_proc(call)
            self._change_directory(call)
        return findings

    def assess_words(self, words: list[Word], *, extra_input: bool) -> list[Finding]:
        """A command that another one runs (`find -exec`, `xargs`)."""
        return self.assess(SimpleCommand(words=tuple(words)), extra_input=extra_input)

    def where(self, word: Word) -> PathClass | None:
        """Where a path argument lies (the worst over every possible cwd, and over every
        protected place a glob could match); None if unknown."""
        if word.value is None or not word.value:
            return None
        raw = word.value
        pattern = None
        if not word.quoted and (glob := _GLOB.search(raw)):
            pattern = raw
            raw = raw[: glob.start()].rsplit("/", 1)[0] if "/" in raw[: glob.start()] else "."
        classes: list[PathClass] = []
        for cwd in self.cwds if not raw.startswith(("/", "~")) else [Path("/")]:
            if cwd is None:
                return None
            classes.append(self.workspace.classify(self.workspace.resolve(cwd, raw)))
            if pattern is not None and (reach := self._glob_reach(cwd, pattern)) is not None:
                classes.append(reach)
        return max(classes, key=_SENSITIVITY.index)

    def in_home(self, word: Word) -> bool:
        """Whether a path argument may lie in the home directory (unknown counts as yes)."""
        raw = word.value
        if raw is None:
            return True
        for cwd in self.cwds if not raw.startswith(("/", "~")) else [Path("/")]:
            if cwd is None:
                return True
            path = self.workspace.resolve(cwd, raw)
            home = self.workspace.home
            if (path == home or home in path.parents) and not self.workspace.contains(path):
                return True
        return False

    def check_write(self, word: Word, verb: str) -> list[Finding]:
        place = self.where(word)
        match place:
            case None:
                return [_opaque(f"{verb} a file the policy cannot resolve ({word.text})")]
            case "inside" | "scratch" | "null":
                return []
            case "persistence":
                return [_destructive(f"{verb} a persistence file ({word.value})")]
            case "private":
                return [_destructive(f"{verb} a private file ({word.value})")]
            case "device":
                return [_destructive(f"{verb} a device ({word.value})")]
            case "outside":
                return [_destructive(f"{verb} {word.value}, outside the workspace")]
            case unreachable:
                assert_never(unreachable)

    def check_redirect(self, redirect: Redirect) -> list[Finding]:
        target = redirect.target
        if target is None or redirect.op in ("<<", "<<-", "<<<"):
            return []
        if redirect.op in ("<&", ">&") and (target.value or "").rstrip("-").isdigit():
            return []  # duplicating a descriptor: 2>&1
        if redirect.op in _WRITE_OPS:
            return self.check_write(target, "writes")
        finding = self._private_argument(target)
        return [finding] if finding is not None else []

    def _program(self, call: Call) -> list[Finding]:
        if call.name in self.functions:
            return []  # its body is part of the script and was judged there
        rule = rule_for(call.name)
        if "/" in call.path and not call.path.startswith(_SYSTEM_BIN):
            where = self.where(Word(text=call.path, value=call.path))
            if where == "inside" and rule is None:
                return []  # a workspace program (docs/security-model.md, "What is not covered")
        if rule is not None:
            return rule(call)
        if call.name in SAFE_PROGRAMS:
            return []
        return [Finding(level="unlisted", reason=f"`{call.name}` is not on the allowlist")]

    def _assignments(self, assignments: tuple[tuple[str, Word], ...]) -> list[Finding]:
        return [
            _opaque(f"it sets {name}, which changes what programs run")
            for name, _ in assignments
            if name in _LOADER_VARIABLES
        ]

    def _glob_reach(self, cwd: Path, pattern: str) -> PathClass | None:
        if pattern == "~" or pattern.startswith("~/"):
            pattern = str(self.workspace.home) + pattern[1:]
        return self.workspace.glob_reach(Path(os.path.normpath(cwd / pattern)))

    def _private_argument(self, word: Word) -> Finding | None:
        """Private files (keys, our config, /proc/*/environ) named anywhere in an argument,
        also through a glob (`~/.ss?/id_rsa`)."""
        if word.value is None:
            if _PROC_SECRET_TEXT.search(word.text):
                return _opaque(f"it reads another process's files ({word.text})")
            return None
        if not word.quoted and _GLOB.search(word.value):
            for cwd in self.cwds:
                reach = self._glob_reach(cwd or Path("/"), word.value)
                if reach in ("private", "persistence"):
                    return _opaque(f"its glob may reach a private file ({word.value})")
        for candidate in _path_candidates(word.value):
            for cwd in self.cwds if not candidate.startswith(("/", "~")) else [Path("/")]:
                path = self.workspace.resolve(cwd, candidate) if cwd is not None else None
                if path is not None and self.workspace.is_private(path):
                    return _opaque(f"it touches a private file ({candidate})")
        return None

    def _change_directory(self, call: Call) -> None:
        targets = [w for w in call.args if w.value == "-" or not (w.value or "").startswith("-")]
        if call.name == "popd" or (targets and targets[0].value in (None, "-")):
            self.cwds.append(None)
            return
        raw = targets[0].value if targets and targets[0].value else "~"
        self.cwds += [None if c is None else self.workspace.resolve(c, raw) for c in self.cwds]
        self.cwds = list(dict.fromkeys(self.cwds))


_SENSITIVITY: list[PathClass] = [
    "null", "inside", "scratch", "outside", "device", "private", "persistence"
]  # fmt: skip


def _into_proc(call: Call) -> list[Finding]:
    """`cd /proc/$PPID`: everything after it reads another process's files by relative name."""
    target = next((w for w in call.args if not (w.value or w.text).startswith("-")), None)
    if target is not None and _PROC_PROCESS.match(target.value or target.text):
        return [_opaque(f"it changes into another process's files ({target.text})")]
    return []


def _env_assignments(words: list[Word], argv: list[Word]) -> list[tuple[str, Word]]:
    """`env A=b cmd` and `sudo A=b cmd`: assignments the wrappers pass on."""
    out: list[tuple[str, Word]] = []
    for word in words[: len(words) - len(argv)]:
        if word.value and re.fullmatch(r"[A-Za-z_]\w*=.*", word.value, flags=re.S):
            name, value = word.value.split("=", 1)
            out.append((name, Word(text=word.text, value=value)))
    return out


def _path_candidates(value: str) -> list[str]:
    """`x`, and the paths in `--opt=x`, `of=x`, `f=@x`, `@x` that may name a file."""
    pieces = {value, value.split("=", 1)[-1], value.rsplit("@", 1)[-1]}
    return [p for p in pieces if p and ("/" in p or p.startswith((".", "~")))]


def _program_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _opaque(reason: str) -> Finding:
    return Finding(level="opaque", reason=reason)


def _destructive(reason: str) -> Finding:
    return Finding(level="destructive", reason=reason)

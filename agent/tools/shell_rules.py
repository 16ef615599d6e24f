"""The shell policy's rules: wrappers and their options, the allowlist, and one check per program.

Pure functions from a `Call` (a program name and its words) to `Finding`s; `shell_policy` walks
the command line and supplies the `Scope` that knows the workspace and the working directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.tools.approval import RiskLevel
from agent.tools.shell_call import Call, Finding, Rule
from agent.tools.shell_git import git_rule
from agent.tools.shell_modes import MODE_RULES, is_stdin_path, python_module_rule, tar_rule
from agent.tools.shell_parse import Word

__all__ = ["RULES", "SAFE_PROGRAMS", "rule_for", "unwrap"]


SAFE_PROGRAMS = frozenset(
    """ls cat head tail less more wc sort uniq cut tr grep egrep fgrep rg ag ack fd fdfind tree
    stat file du df pwd echo printf true false test [ date whoami id uname hostname printenv
    which type basename dirname realpath readlink diff cmp comm jq yq column fold fmt paste join
    nl expand unexpand rev tac shuf seq sleep expr md5sum sha1sum sha256sum sha512sum cksum b2sum
    base64 base32 xxd od hexdump strings locale nproc free uptime ps pgrep ss netstat ping dig
    nslookup host tput clear cal getconf arch lscpu lsblk man info help pip pip3 pytest py.test
    mypy ruff black isort flake8 pylint pyright tox nox uv poetry coverage pre-commit npm yarn
    pnpm tsc eslint prettier jest vitest make cmake ninja meson gcc g++ cc c++ clang clang++ ld as
    ar go gofmt cargo rustc rustfmt rustup javac java mvn gradle gem bundle rake composer zip
    gzip gunzip zcat bzip2 bunzip2 xz unxz zstd lz4 export declare local readonly typeset unset
    set shift exit return break continue : read wait jobs let hash getopts true false cd pushd
    popd dirs umask ulimit wc iconv numfmt tsort sum whereis""".split()
)
"""Programs that only read, print, or build and test the workspace's own code."""

_SHELLS = frozenset("sh bash zsh dash ksh mksh fish ash csh tcsh".split())
_SCRIPT_FLAGS = {
    "python": ("-c",),
    "node": ("-e", "--eval", "-p", "--print"),
    "deno": ("eval",),
    "bun": ("-e", "--eval"),
    "ruby": ("-e",),
    "perl": ("-e", "-E"),
    "php": ("-r",),
    "lua": ("-e",),
    "Rscript": ("-e",),
    "tclsh": (),
    "osascript": ("-e",),
}
_PYTHON_MODULES = frozenset(
    "pytest pip venv http.server json.tool mypy ruff black isort unittest build compileall pydoc"
    " timeit cProfile profile site ensurepip doctest tabnanny py_compile pyflakes flake8 coverage"
    " pylint tox nox uv zipfile tarfile".split()
)
# ---- wrappers --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Wrapper:
    with_value: frozenset[str] = frozenset()
    flags: str = ""
    """Short options that take no value (clusters such as `-EH` are fine)."""
    long_flags: frozenset[str] = frozenset()
    positionals: int = 0
    """Words before the command (timeout's duration, chroot's directory)."""


def _w(
    with_value: str = "", flags: str = "", long_flags: str = "", positionals: int = 0
) -> _Wrapper:
    return _Wrapper(
        frozenset(with_value.split()), flags, frozenset(long_flags.split()), positionals
    )


_WRAPPERS: dict[str, _Wrapper] = {
    "sudo": _w("-u -g -C -h -p -r -t -U -D -R -T", "AbEeHiKklnPSsVv", "--preserve-env --login"),
    "doas": _w("-u -C", "nsL"),
    "env": _w("-u -C --unset --chdir", "0iv", "--ignore-environment --null --debug"),
    "nice": _w("-n --adjustment"),
    "ionice": _w("-c -n -p -P -u --class --classdata", "t"),
    "stdbuf": _w("-i -o -e --input --output --error"),
    "timeout": _w("-s -k --signal --kill-after", "v", "--preserve-status --foreground", 1),
    "nohup": _w(),
    "time": _w("-f -o --format --output", "pvaq", "--portability --verbose --append"),
    "command": _w("", "p"),
    "builtin": _w(),
    "exec": _w("-a", "cl"),
    "coproc": _w(),
    "xargs": _w(
        "-a -d -E -e -I -i -L -l -n -P -s --arg-file --delimiter --eof --replace --max-lines"
        " --max-args --max-procs --max-chars --process-slot-var",
        "0oprtx",
        "--null --interactive --no-run-if-empty --verbose --exit --open-tty --show-limits",
    ),
    "busybox": _w(),
    "chroot": _w("--userspec --groups", "", "--skip-chdir", 1),
    "setsid": _w("", "cfw", "--ctty --fork --wait"),
    "flock": _w("-w -E --timeout --conflict-exit-code", "sxenuoF", "--shared --exclusive", 1),
    "taskset": _w("", "ac", "--all-tasks --cpu-list", 1),
    "chrt": _w("-T -P -D", "bdfiorRmav", "", 1),
    "unbuffer": _w(),
    "strace": _w("-o -e -p -s -u -E -P -a -I -b -S -O -X", "cCdfFhiqrtTvVwxyzZ"),
    "ltrace": _w("-o -e -p -s -u -n -a -A -D -l", "bcCfhiLrStT"),
    "numactl": _w("-i -m -N -C -p --interleave --membind --cpunodebind --physcpubind"),
    "caffeinate": _w("-t -w", "dimsu"),
    "watch": _w(),
    "script": _w(),
}
_ROOT_WRAPPERS = frozenset({"sudo", "doas", "su", "pkexec", "run0", "sudoedit"})
_STRING_WRAPPERS = frozenset({"watch", "script", "su", "runuser", "ssh", "parallel", "trap"})


def unwrap(words: list[Word]) -> tuple[list[Word], list[Finding], bool]:
    """Strip wrappers; return the wrapped command, what the wrappers themselves imply, and
    whether the command receives arguments at run time (xargs)."""
    findings: list[Finding] = []
    extra_input = False
    while words and words[0].value is not None:
        name = words[0].value.rsplit("/", 1)[-1]
        if name in _ROOT_WRAPPERS:
            findings.append(Finding(level="destructive", reason=f"it runs as root ({name})"))
        if name in _STRING_WRAPPERS:
            return [], [*findings, _opaque(f"`{name}` runs a command string")], False
        spec = _WRAPPERS.get(name)
        if spec is None:
            break
        if name == "command" and any(w.value in ("-v", "-V") for w in words[1:2]):
            return [], findings, False  # `command -v x` only looks x up
        rest = _skip_options(name, words[1:], spec)
        if rest is None:
            return [], [*findings, _opaque(f"the policy cannot see past `{name}`'s options")], False
        extra_input = extra_input or name == "xargs"
        if name == "xargs" and not rest:
            rest = [Word(text="echo", value="echo")]
        words = rest
    return words, findings, extra_input


def _skip_options(name: str, words: list[Word], spec: _Wrapper) -> list[Word] | None:
    i = 0
    while i < len(words):
        value = words[i].value
        if value is None:
            return None
        if value == "--":
            i += 1
            break
        if name in ("env", "sudo") and re.fullmatch(r"[A-Za-z_]\w*=.*", value, flags=re.S):
            i += 1
            continue
        if name == "env" and value in ("-S", "--split-string") or value.startswith("--split"):
            return None
        if not value.startswith("-") or value == "-":
            break
        if value in spec.with_value:
            i += 2
        elif value.startswith("--") and ("=" in value or value in spec.long_flags):
            i += 1
        elif value[:2] in spec.with_value or (name == "nice" and value[1:].isdigit()):
            i += 1  # `-n5`, `-oL`, `nice -5`
        elif not value.startswith("--") and all(c in spec.flags for c in value[1:]):
            i += 1
        else:
            return None
    i += spec.positionals
    return words[i:] if i <= len(words) else None


# ---- per-program rules -----------------------------------------------------------------------


def _opaque(reason: str) -> Finding:
    return Finding(level="opaque", reason=reason)


def _destructive(reason: str) -> Finding:
    return Finding(level="destructive", reason=reason)


def _split(call: Call) -> tuple[list[str], list[Word]]:
    """Short and long options (clusters kept whole) and the operands, honouring `--`."""
    flags: list[str] = []
    operands: list[Word] = []
    ended = False
    for word in call.args:
        value = word.value
        if not ended and value == "--":
            ended = True
        elif not ended and value is not None and value.startswith("-") and value != "-":
            flags.append(value)
        else:
            operands.append(word)
    return flags, operands


def _has_short(flags: list[str], letters: str) -> bool:
    return any(not f.startswith("--") and any(c in f[1:] for c in letters) for f in flags)


def _rm(call: Call) -> list[Finding]:
    flags, operands = _split(call)
    if any(w.value is None for w in call.args if (w.value or "-").startswith("-")):
        return [_opaque("`rm` with options the policy cannot see")]
    recursive = _has_short(flags, "rR") or "--recursive" in flags
    forced = _has_short(flags, "f") or "--force" in flags
    shown = " ".join(w.text for w in operands) or "its input"
    if recursive or forced:
        kind = "recursive" if recursive else "forced"
        return [_destructive(f"{kind} delete of {shown}")]
    if call.extra_input:
        return [_opaque("it deletes paths it reads at run time")]
    return [f for w in operands for f in call.scope.check_write(w, "deletes")]


def _writes_operands(verb: str) -> Rule:
    def rule(call: Call) -> list[Finding]:
        _, operands = _split(call)
        return [f for w in operands for f in call.scope.check_write(w, verb)]

    return rule


def _copy_like(verb: str, *, moves: bool) -> Rule:
    """cp, mv, install, ln: the destination is written; mv also deletes its sources."""

    def rule(call: Call) -> list[Finding]:
        flags, operands = _split(call)
        target = _option_value(call, ("-t", "--target-directory"))
        if target is not None:
            destinations, sources = [target], [w for w in operands if w is not target]
        else:
            destinations, sources = operands[-1:], operands[:-1]
        found = [f for w in destinations for f in call.scope.check_write(w, verb)]
        if moves:
            found += [f for w in sources for f in call.scope.check_write(w, "moves away")]
        if _has_short(flags, "R") and call.name in ("chmod", "chown", "chgrp"):
            found.append(_destructive(f"recursive {call.name}"))
        return found

    return rule


def _chmod_like(call: Call) -> list[Finding]:
    flags, operands = _split(call)
    found = [f for w in operands[1:] for f in call.scope.check_write(w, "changes permissions of")]
    if _has_short(flags, "R") or "--recursive" in flags:
        found.append(_destructive(f"recursive {call.name}"))
    return found


def _option_value(call: Call, names: tuple[str, ...]) -> Word | None:
    args = call.args
    for i, word in enumerate(args):
        value = word.value or ""
        if value in names and i + 1 < len(args):
            return args[i + 1]
        for name in names:
            if name.startswith("--") and value.startswith(name + "="):
                return Word(text=word.text, value=value.split("=", 1)[1])
    return None


def _always(level: RiskLevel, reason: str) -> Rule:
    return lambda call: [Finding(level=level, reason=reason.format(name=call.name))]


def _interpreter(call: Call) -> list[Finding]:
    """Interpreters: a script file is fine; code from -c/-e, a pipe or inline text is opaque."""
    family = "python" if re.fullmatch(r"python[\d.]*|pypy\d*", call.name) else call.name
    flags = _SCRIPT_FLAGS.get(family, ())
    values = call.values()
    for i, value in enumerate(values):
        if value in flags or (family == "python" and value and re.fullmatch(r"-[^-]*c", value)):
            return [_opaque(f"`{call.name} {value}` runs code given on the command line")]
        if family == "python" and value == "-m":
            module = values[i + 1] if i + 1 < len(values) else None
            if module in _PYTHON_MODULES:
                return python_module_rule(module, call.args[i + 2 :], call)
            return [
                Finding(level="unlisted", reason=f"`python -m {module}` is not on the allowlist")
            ]
        if is_stdin_path(value) and value != "-":
            return [_opaque(f"{call.name} runs a script read from its input ({value})")]
        if value is not None and not value.startswith("-"):
            return []  # a script file
    if call.piped_in or call.inline_input or "-" in values:
        return [_opaque(f"it pipes a script into {call.name}")]
    return []


def _shell(call: Call) -> list[Finding]:
    flags, operands = _split(call)
    if any(not f.startswith("--") and "c" in f for f in flags):
        return [_opaque(f"`{call.name} -c` runs a command string")]
    if any(w.value is None for w in call.args):
        return [_opaque(f"`{call.name}` with arguments the policy cannot see")]
    if operands and is_stdin_path(operands[0].value):
        return [_opaque(f"{call.name} runs a script read from its input ({operands[0].text})")]
    if "-s" in flags or not operands:
        if call.piped_in or call.inline_input:
            return [_opaque(f"it pipes a script into {call.name}")]
    return []


def _sed(call: Call) -> list[Finding]:
    if _script_from_stdin(call):
        return [_opaque("the sed script is read from its input")]
    flags, operands = _split(call)
    in_place = any(f.startswith(("-i", "--in-place")) for f in flags) or any(
        re.fullmatch(r"-[nrEsuz]*i.*", f) for f in flags if not f.startswith("--")
    )
    scripts = [w.value or "" for w in operands[:1]] + [
        (w.value or "") for i, w in enumerate(call.args[1:]) if call.args[i].value == "-e"
    ]
    if any(_SED_RUNS.search(script) for script in scripts):
        return [_opaque("the sed script runs commands or writes files")]
    if not in_place:
        return []
    files = (
        operands[1:]
        if not any(call.args[i].value == "-e" for i in range(len(call.args)))
        else operands
    )
    return [f for w in files for f in call.scope.check_write(w, "edits in place")]


_SED_ADDRESS = r"(?:\d+|\$|/[^/]*/)?(?:,(?:\d+|\$|/[^/]*/))?!?\s*"
_SED_RUNS = re.compile(
    rf"(?:^|[;{{}}\n])\s*{_SED_ADDRESS}[ewW](?:\s|$)"  # the e, w and W commands
    r"|s(.).*?\1.*?\1[gpiImM0-9]*[ew]"  # s///e and s///w FILE
)


def _source(call: Call) -> list[Finding]:
    _, operands = _split(call)
    if not operands or operands[0].value is None or is_stdin_path(operands[0].value):
        return [_opaque(f"`{call.name}` runs a script the policy cannot see")]
    return []


def _script_from_stdin(call: Call) -> bool:
    """`awk -f /dev/stdin`, `sed -f -`, `sed --file=/dev/stdin`."""
    args = call.args
    for i, word in enumerate(args):
        value = word.value or ""
        if value in ("-f", "--file") and i + 1 < len(args) and is_stdin_path(args[i + 1].value):
            return True
        if value.startswith("--file=") and is_stdin_path(value.split("=", 1)[1]):
            return True
    return False


def _awk(call: Call) -> list[Finding]:
    if _script_from_stdin(call):
        return [_opaque("the awk program is read from its input")]
    program = next((w.value for w in call.args if w.value and not w.value.startswith("-")), "")
    if re.search(r"system\s*\(|\|\s*(getline|&)|print[^;]*[|>]\s*\"", program or ""):
        return [_opaque("the awk program runs commands or writes files")]
    if any(w.value == "inplace" for w in call.args):
        return [_opaque("awk -i inplace edits files")]
    return []


def _tee(call: Call) -> list[Finding]:
    _, operands = _split(call)
    return [f for w in operands for f in call.scope.check_write(w, "writes")]


def _truncate(call: Call) -> list[Finding]:
    _, operands = _split(call)
    sized = {i + 1 for i, w in enumerate(call.args) if w.value in ("-s", "--size", "-r")}
    files = [w for i, w in enumerate(call.args) if i not in sized and w in operands]
    return [f for w in files for f in call.scope.check_write(w, "truncates")]


def _dd(call: Call) -> list[Finding]:
    found: list[Finding] = []
    for word in call.args:
        if word.value is None:
            found.append(_opaque(f"`dd` operand the policy cannot see ({word.text})"))
        elif word.value.startswith("of="):
            target = Word(text=word.text, value=word.value[3:])
            found += call.scope.check_write(target, "writes raw data to")
    return found


def _curl(call: Call) -> list[Finding]:
    found: list[Finding] = []
    names = ("-o", "--output", "-O", "--output-document", "-P", "--directory-prefix")
    for i, word in enumerate(call.args):
        value = word.value or ""
        if (
            value in names
            and call.name == "wget"
            or value in ("-o", "--output")
            and call.name == "curl"
        ):
            if i + 1 < len(call.args):
                found += call.scope.check_write(call.args[i + 1], "downloads into")
        if value.startswith("@") or value in ("-T", "--upload-file"):
            source = value[1:] if value.startswith("@") else None
            if (
                source is not None
                and call.scope.where(Word(text=word.text, value=source)) == "private"
            ):
                found.append(_opaque(f"it uploads a private file ({source})"))
    return found


def _tar(call: Call) -> list[Finding]:
    texts = [w.value or "" for w in call.args]
    if any(
        t.startswith(("--to-command", "--use-compress-program", "--checkpoint-action", "-I"))
        or t in ("--rsh-command", "--info-script", "-F", "--new-volume-script")
        for t in texts
    ):
        return [_opaque("tar runs another program")]
    directory = _option_value(call, ("-C", "--directory"))
    extracting = (
        any(
            t.startswith("-")
            and "x" in t
            and not t.startswith("--")
            or t in ("--extract", "--get")
            or re.fullmatch(r"[a-zA-Z]*x[a-zA-Z]*", t)
            for t in texts[:1]
        )
        or "--extract" in texts
    )
    if extracting and directory is not None:
        return call.scope.check_write(directory, "extracts into")
    return []


def _unzip(call: Call) -> list[Finding]:
    directory = _option_value(call, ("-d",))
    return call.scope.check_write(directory, "extracts into") if directory is not None else []


def _rsync(call: Call) -> list[Finding]:
    flags, operands = _split(call)
    if any(f.startswith("--delete") or f.startswith("--remove-source") for f in flags):
        return [_destructive("rsync deletes files (--delete)")]
    if any(f in ("-e", "--rsh") or f.startswith("--rsh=") for f in flags):
        return [_opaque("rsync runs a remote shell command")]
    destination = operands[-1:] if len(operands) > 1 else []
    return [
        f
        for w in destination
        if ":" not in (w.value or "")
        for f in call.scope.check_write(w, "syncs into")
    ]


def _crontab(call: Call) -> list[Finding]:
    if [w.value for w in call.args] == ["-l"]:
        return []
    return [_destructive("it changes the crontab")]


def _systemctl(call: Call) -> list[Finding]:
    harmless = {"status", "list-units", "list-unit-files", "list-timers", "show", "cat",
                "is-active", "is-enabled", "is-failed", "help", "--version"}  # fmt: skip
    verbs = [w.value for w in call.args if not (w.value or "-").startswith("-")]
    if verbs and verbs[0] in harmless:
        return []
    return [_destructive(f"it changes system services (systemctl {' '.join(map(str, verbs[:1]))})")]


def _find(call: Call) -> list[Finding]:
    args = list(call.args)
    starts = []
    for word in args:
        if (word.value or "-").startswith(("-", "(", "!")):
            break
        starts.append(word)
    starts = starts or [Word(text=".", value=".")]
    found: list[Finding] = []
    i = 0
    while i < len(args):
        value = args[i].value
        if value == "-delete":
            found.append(_destructive(f"find -delete removes files under {starts[0].text}"))
        elif value in ("-fprint", "-fprint0", "-fprintf", "-fls") and i + 1 < len(args):
            found += call.scope.check_write(args[i + 1], "writes")
        elif value in ("-exec", "-execdir", "-ok", "-okdir"):
            end = next(
                (j for j in range(i + 1, len(args)) if args[j].value in (";", "+")), len(args)
            )
            inner = [_found_path(w, starts) for w in args[i + 1 : end]]
            found += call.scope.assess_words(inner, extra_input=False)
            i = end
        i += 1
    return found


def _found_path(word: Word, starts: list[Word]) -> Word:
    """`{}` in `find -exec` stands for a path under the start directories."""
    if word.value != "{}":
        return word
    worst = max(starts, key=lambda w: 0 if w.value in (".", "./") else 1)
    return Word(text=word.text, value=worst.value)


RULES: dict[str, Rule] = {
    "rm": _rm,
    "unlink": _writes_operands("deletes"),
    "rmdir": _writes_operands("deletes"),
    "shred": _always("destructive", "shred destroys file contents"),
    "truncate": _truncate,
    "touch": _writes_operands("creates"),
    "mkdir": _writes_operands("creates"),
    "mkfifo": _writes_operands("creates"),
    "cp": _copy_like("writes", moves=False),
    "install": _copy_like("writes", moves=False),
    "mv": _copy_like("writes", moves=True),
    "chmod": _chmod_like,
    "chown": _chmod_like,
    "chgrp": _chmod_like,
    "tee": _tee,
    "dd": _dd,
    "sed": _sed,
    "gsed": _sed,
    "awk": _awk,
    "gawk": _awk,
    "mawk": _awk,
    "nawk": _awk,
    "find": _find,
    "git": git_rule,
    "curl": _curl,
    "wget": _curl,
    "tar": lambda call: _tar(call) + tar_rule(call),
    "unzip": _unzip,
    "rsync": _rsync,
    "crontab": _crontab,
    "at": _always("destructive", "`{name}` schedules a command"),
    "batch": _always("destructive", "`{name}` schedules a command"),
    "systemctl": _systemctl,
    "systemd-run": _always("destructive", "systemd-run starts a service"),
    "eval": _always("opaque", "`eval` runs a string as code"),
    "source": _source,
    ".": _source,
    "alias": _always("opaque", "`alias` redefines commands"),
    "enable": _always("opaque", "`enable` loads or hides builtins"),
    "patch": lambda call: [
        f
        for w in [_option_value(call, ("-o", "--output"))]
        if w is not None
        for f in call.scope.check_write(w, "writes")
    ],  # fmt: skip
}
for _name in ("kill", "killall", "pkill", "skill", "xkill", "killall5"):
    RULES[_name] = _always("destructive", "`{name}` kills processes")
for _name in ("shutdown", "reboot", "halt", "poweroff", "init", "telinit"):
    RULES[_name] = _always("destructive", "`{name}` stops or restarts the machine")
for _name in ("mkfs", "mke2fs", "mkswap", "wipefs", "fdisk", "sfdisk", "gdisk", "parted",
              "swapon", "swapoff", "mount", "umount", "losetup", "cryptsetup", "blkdiscard"):  # fmt: skip
    RULES[_name] = _always("destructive", "`{name}` changes disks or filesystems")
for _name in ("chattr", "setfacl", "useradd", "usermod", "userdel", "groupadd", "passwd",
              "chpasswd", "visudo", "iptables", "ip6tables", "nft", "ufw", "sysctl", "modprobe",
              "insmod", "rmmod", "update-alternatives", "ldconfig"):  # fmt: skip
    RULES[_name] = _always("destructive", "`{name}` changes system configuration")
RULES.update({k: v for k, v in MODE_RULES.items() if k not in RULES})
for _name in _SHELLS:
    RULES[_name] = _shell
for _name in ("python", "python2", "python3", "pypy", "pypy3", "node", "nodejs", "deno", "bun",
              "ruby", "perl", "php", "lua", "Rscript", "tclsh", "osascript"):  # fmt: skip
    RULES[_name] = _interpreter


def rule_for(name: str) -> Rule | None:
    """The rule for a program name, `mkfs.ext4` and `python3.11` included."""
    if name in RULES:
        return RULES[name]
    if name.startswith("mkfs."):
        return RULES["mkfs"]
    if re.fullmatch(r"python\d+(\.\d+)?", name):
        return _interpreter
    return None

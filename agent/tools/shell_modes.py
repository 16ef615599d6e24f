"""The shell policy's rules for allowlisted programs' own exec, delete and write modes.

Programs that build, pack or print (`make`, `npm`, `cmake`, `zip`, `gzip`, `sort`, compilers,
`python -m …`) are allowlisted because their everyday use is harmless, but most of them can also
run code given on the command line (`make --eval`, `npm exec`, `cmake -E env`, `zip -TT`,
`python -m timeit`), delete files (`gzip`, `zip -m`, `tar --remove-files`, `venv --clear`) or
write wherever an option says (`sort -o`, `gcc -o`, `tar -cf`). These rules judge those modes;
`shell_rules` merges them into its table. Scripts read from standard input (`bash /dev/stdin`,
`make -f -`) are recognised by `is_stdin_path`. Pure functions from a `Call` to `Finding`s.
"""

from __future__ import annotations

import re

from agent.tools.shell_call import Call, Finding, Rule
from agent.tools.shell_parse import Word

__all__ = ["MODE_RULES", "is_stdin_path", "link_rule", "python_module_rule", "tar_rule"]

_STDIN = re.compile(r"^(-|/dev/stdin|/dev/fd/\d+|/proc/[^/]+/fd/\d+)$")
_CODE_MODULES = frozenset({"timeit"})
"""`python -m` modules whose arguments are code."""


def is_stdin_path(value: str | None) -> bool:
    """`-`, `/dev/stdin`, `/dev/fd/0`, `/proc/self/fd/0`: a script that arrives on a pipe."""
    return value is not None and _STDIN.match(value) is not None


def _opaque(reason: str) -> Finding:
    return Finding(level="opaque", reason=reason)


def _destructive(reason: str) -> Finding:
    return Finding(level="destructive", reason=reason)


def _option(args: tuple[Word, ...], names: tuple[str, ...]) -> list[Word]:
    """Every value given to one of `names`: `-o X`, `-oX` (short names), `--out=X`."""
    found: list[Word] = []
    for i, word in enumerate(args):
        value = word.value or ""
        for name in names:
            if value == name and i + 1 < len(args):
                found.append(args[i + 1])
            elif name.startswith("--") and value.startswith(name + "="):
                found.append(Word(text=word.text, value=value.split("=", 1)[1]))
            elif len(name) == 2 and value.startswith(name) and len(value) > 2 and "=" not in name:
                if not value.startswith("--"):
                    found.append(Word(text=word.text, value=value[2:]))
    return found


def _operands(args: tuple[Word, ...], with_value: frozenset[str] = frozenset()) -> list[Word]:
    out: list[Word] = []
    skip = False
    ended = False
    for word in args:
        value = word.value
        if skip:
            skip = False
        elif not ended and value == "--":
            ended = True
        elif not ended and value is not None and value.startswith("-") and value != "-":
            skip = value in with_value
        else:
            out.append(word)
    return out


def _writes(call: Call, words: list[Word], verb: str) -> list[Finding]:
    return [f for w in words for f in call.scope.check_write(w, verb)]


def _make(call: Call) -> list[Finding]:
    values = call.values()
    if any(v in ("-E", "--eval") or (v or "").startswith("--eval=") for v in values):
        return [_opaque("`make --eval` runs make code given on the command line")]
    if any(is_stdin_path(w.value) for w in _option(call.args, ("-f", "--file", "--makefile"))):
        return [_opaque("make reads its makefile from standard input")]
    for directory in _option(call.args, ("-C", "--directory")):
        if call.scope.where(directory) not in ("inside", "scratch"):
            return [_opaque(f"make runs the makefile of {directory.text}, outside the workspace")]
    return []


_PACKAGE_RUNNERS = frozenset({"exec", "x", "dlx", "create", "init"})


def _package_manager(call: Call) -> list[Finding]:
    operands = _operands(call.args)
    verb = operands[0].value if operands else None
    if verb in _PACKAGE_RUNNERS and (verb != "init" or len(operands) > 1):
        return [_opaque(f"`{call.name} {verb}` fetches and runs a package's program")]
    values = call.values()
    if any(v in ("-g", "--global", "--location=global") for v in values):
        return [_opaque(f"`{call.name}` installs outside the workspace (--global)")]
    if verb == "config" and len(operands) > 1 and operands[1].value in ("set", "edit", "delete"):
        return [_opaque(f"`{call.name} config` changes your settings outside the workspace")]
    return _writes(call, _option(call.args, ("--prefix",)), "installs into")


_CMAKE_RUNS = frozenset({"env", "chdir", "time"})
_CMAKE_WRITES_ALL = frozenset(
    {"rm", "remove", "remove_directory", "make_directory", "touch", "touch_nocreate", "rename"}
)
_CMAKE_WRITES_LAST = frozenset(
    {"copy", "copy_directory", "copy_if_different", "copy_directory_if_different",
     "create_symlink", "create_hardlink"}
)  # fmt: skip


def _cmake(call: Call) -> list[Finding]:
    values = call.values()
    if any(is_stdin_path(w.value) for w in _option(call.args, ("-P",))):
        return [_opaque("cmake runs a script from standard input")]
    if "-E" not in values:
        return []
    rest = call.args[values.index("-E") + 1 :]
    command = rest[0].value if rest else None
    targets = _operands(rest[1:])
    if command in _CMAKE_RUNS:
        return [_opaque(f"`cmake -E {command}` runs another command")]
    if command in _CMAKE_WRITES_ALL:
        return _writes(call, targets, f"changes (cmake -E {command})")
    if command in _CMAKE_WRITES_LAST:
        return _writes(call, targets[-1:], f"writes (cmake -E {command})")
    return []


def _zip(call: Call) -> list[Finding]:
    values = call.values()
    if any(
        v in ("-TT", "--unzip-command") or (v or "").startswith("--unzip-command=") for v in values
    ):
        return [_opaque("`zip -TT` runs a command of its own")]
    operands = _operands(call.args, frozenset({"-b", "-n", "-t", "-tt", "-x", "-i", "-O"}))
    found = _writes(call, operands[:1], "writes the archive")
    moves = any(v == "--move" or re.fullmatch(r"-[a-zA-Z]*m[a-zA-Z]*", v or "") for v in values)
    if moves:
        found += _writes(call, operands[1:], "deletes (zip -m)")
    return found


_KEEPS = re.compile(r"-[a-zA-Z0-9]*[cklt][a-zA-Z0-9]*")
_KEEP_LONG = frozenset({"--stdout", "--to-stdout", "--keep", "--list", "--test"})


def _compressor(call: Call) -> list[Finding]:
    """gzip, xz, bzip2 (and their un- forms) replace each file they are given; zstd and lz4
    do with --rm; every one writes `-o` where it says."""
    values = [v or "" for v in call.values()]
    found = _writes(call, _option(call.args, ("-o", "--output")), "writes")
    removes = call.name in ("zstd", "unzstd", "lz4", "unlz4") and "--rm" in values
    if not removes and call.name not in ("zstd", "unzstd", "lz4", "unlz4"):
        keeps = any(_KEEPS.fullmatch(v) and not v.startswith("--") for v in values)
        removes = not keeps and not any(v in _KEEP_LONG for v in values)
    if removes:
        found += _writes(
            call, _operands(call.args, frozenset({"-S", "--suffix", "-o"})), "replaces"
        )
    return found


def _output_option(*names: str) -> Rule:
    return lambda call: _writes(call, _option(call.args, names), "writes")


def _second_operand(with_value: str) -> Rule:
    """`uniq IN OUT`, `xxd IN OUT`: the second operand is written."""
    options = frozenset(with_value.split())
    return lambda call: _writes(call, _operands(call.args, options)[1:2], "writes")


def _ps(call: Call) -> list[Finding]:
    if any(v and not v.startswith("-") and "e" in v for v in call.values()):
        return [_opaque("`ps e` shows other processes' environments")]
    return []


def _pip(call: Call) -> list[Finding]:
    values = call.values()
    if "--user" in values:
        return [_opaque("`pip --user` installs into your home (code that runs at start-up)")]
    operands = _operands(call.args)
    if operands and operands[0].value == "config":
        return [_opaque("`pip config` changes your settings outside the workspace")]
    names = ("-t", "--target", "-d", "--dest", "--prefix", "--root", "--src")
    return _writes(call, _option(call.args, names), "installs into")


def python_module_rule(module: str | None, rest: tuple[Word, ...], call: Call) -> list[Finding]:
    """`python -m MODULE REST…` for an allowlisted module: its own code and write modes."""
    if module in _CODE_MODULES:
        return [_opaque(f"`python -m {module}` runs code given on the command line")]
    sub = Call(name=module or "", path=module or "", args=rest, scope=call.scope)
    match module:
        case "venv":
            return _writes(sub, _operands(rest, frozenset({"--prompt"})), "creates or clears")
        case "http.server":
            served = _option(rest, ("-d", "--directory")) or [Word(text=".", value=".")]
            if any(call.scope.where(w) not in ("inside", "scratch") for w in served):
                return [_opaque("it serves files from outside the workspace")]
            return []
        case "zipfile" | "tarfile":
            targets = _option(rest, ("-e", "--extract", "-c", "--create"))
            extracting = _option(rest, ("-e", "--extract"))
            dirs = _operands(rest)[-1:] if extracting else []
            return _writes(sub, [*targets[:1], *dirs], "writes")
        case "pip":
            return _pip(sub)
        case _:
            return []


def tar_rule(call: Call) -> list[Finding]:
    """The archive tar creates (`-cf FILE`) is a write; `--remove-files` deletes what it packs;
    `-P` extracts to absolute paths."""
    texts = [w.value or "" for w in call.args]
    cluster = texts[0] if texts and re.fullmatch(r"-?[A-Za-z]+", texts[0]) else ""
    letters = cluster.lstrip("-") if not cluster.startswith("--") else ""
    short = "".join(t[1:] for t in texts if re.fullmatch(r"-[A-Za-z]+", t)) + letters
    creating = bool(set(short) & set("cruA")) or any(
        t in ("--create", "--append", "--update", "--concatenate") for t in texts
    )
    found: list[Finding] = []
    if "P" in short or "--absolute-names" in texts:
        found.append(_opaque("tar -P writes to absolute paths"))
    archive = _option(call.args, ("--file",))
    for i, text in enumerate(texts):
        if re.fullmatch(r"-?[A-Za-z]*f", text) and (i == 0 or text.startswith("-")):
            if i + 1 < len(call.args):
                archive.append(call.args[i + 1])
    if creating:
        found += _writes(call, archive, "writes the archive")
    if "--remove-files" in texts:
        skip = {id(w) for w in archive}
        sources = [
            w for w in _operands(call.args[1:] if letters else call.args) if id(w) not in skip
        ]
        found += _writes(call, sources, "deletes (tar --remove-files)")
    return found


def link_rule(call: Call) -> list[Finding]:
    """`ln`: the link is a write; a hard link to a file outside the workspace, or a symbolic
    link to a private or start-up file or into the home, lets a later write change it."""
    values = [v or "" for v in call.values()]
    symbolic = any(v == "--symbolic" or re.fullmatch(r"-[a-zA-Z]*s[a-zA-Z]*", v) for v in values)
    operands = _operands(call.args, frozenset({"-t", "--target-directory", "-S", "--suffix"}))
    target_dir = _option(call.args, ("-t", "--target-directory"))
    destinations = target_dir or operands[-1:]
    sources = operands if target_dir else operands[:-1]
    found = _writes(call, destinations, "links")
    for source in sources:
        place = call.scope.where(source)
        if place in ("private", "persistence"):
            found.append(_destructive(f"it links to a {place} file ({source.text})"))
        elif not symbolic and place not in ("inside", "scratch", "null"):
            found.append(_opaque(f"it hard-links {source.text}, outside the workspace"))
        elif symbolic and call.scope.in_home(source):
            found.append(_opaque(f"it links into the home directory ({source.text})"))
    return found


MODE_RULES: dict[str, Rule] = {
    "make": _make,
    "gmake": _make,
    "npm": _package_manager,
    "pnpm": _package_manager,
    "yarn": _package_manager,
    "cmake": _cmake,
    "zip": _zip,
    "sort": _output_option("-o", "--output"),
    "iconv": _output_option("-o", "--output"),
    "uniq": _second_operand("-f -s -w --skip-fields --skip-chars --check-chars"),
    "xxd": _second_operand("-c -C -g -l -o -s -n -cols -len -groupsize -seek -name"),
    "ps": _ps,
    "pip": _pip,
    "pip3": _pip,
    "ln": link_rule,
    "tar": tar_rule,
}
for _name in ("gzip", "gunzip", "xz", "unxz", "lzma", "unlzma", "bzip2", "bunzip2", "zstd",
              "unzstd", "lz4", "unlz4", "compress"):  # fmt: skip
    MODE_RULES[_name] = _compressor
for _name in ("gcc", "g++", "cc", "c++", "clang", "clang++", "ld", "as", "rustc", "tcc"):
    MODE_RULES[_name] = _output_option("-o", "--out-dir", "--output")
MODE_RULES["javac"] = _output_option("-d")
MODE_RULES["go"] = lambda call: _writes(call, _option(call.args, ("-o",)), "writes")

"""The workspace: where tools may write, and which paths are private or persistent wherever they are.

Paths are resolved the way the kernel will see them: `~` expanded against the real home,
relative paths taken from the working directory, `..` and every symlink followed
(`os.path.realpath`). On a case-insensitive filesystem (macOS, Windows) containment compares
case-folded, NFC-normalised paths, so `/Users/Me/WORK/../../.SSH` is still `~/.ssh`.

- inside the workspace: reads and writes are fine;
- scratch (`/tmp`, `/var/tmp`): the shell may write there;
- private (`~/.ssh`, `~/.aws`, `~/.gnupg`, `~/.netrc`, cloud and registry credentials,
  `HERMES_HOME`, `/proc/*/environ`): reading needs approval even inside the workspace;
- persistence (shell start-up files, `~/.ssh`, cron, systemd and autostart directories, git
  hooks and config, `/etc`, Python `.pth` and `sitecustomize` files, `~/.local/bin`, editor
  and tool rc files): writing is refused for file tools and destructive for the shell. The home
  entries count inside the workspace too (`ws/.bashrc`, `ws/.local/bin/git`), as they would if
  the workspace were a home, and a `.pth` file runs code from any site-packages, a project's
  `.venv` included.

A glob (`~/.ss?/id_rsa`) is judged by the protected places it could match (`glob_reach`).
"""

from __future__ import annotations

import fnmatch
import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeAlias

__all__ = ["PathClass", "Workspace"]

PathClass: TypeAlias = Literal[
    "inside", "scratch", "outside", "private", "persistence", "device", "null"
]

_PRIVATE_IN_HOME = (
    ".ssh", ".aws", ".gnupg", ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".docker",
    ".kube", ".config/gcloud", ".config/gh", ".azure", ".codex", ".pgpass", ".vault-token",
)  # fmt: skip
_PERSISTENCE_IN_HOME = (
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc",
    ".zprofile", ".zshenv", ".zlogin", ".config/fish", ".ssh", ".config/autostart",
    ".config/systemd", ".local/share/systemd", ".pam_environment", ".xprofile", ".xinitrc",
    ".gitconfig", ".config/git", ".inputrc", ".bash_aliases", ".config/environment.d",
    ".local/bin", ".local/lib", ".config/pip", ".pip", ".vimrc", ".vim", ".config/nvim",
    ".emacs", ".emacs.d", ".tmux.conf", ".xsession", ".xsessionrc", ".config/user-dirs.dirs",
    ".pythonrc", ".pythonstartup", ".npmrc", ".yarnrc", ".curlrc", ".wgetrc", ".ssh",
)  # fmt: skip
_PERSISTENCE_NAMES = re.compile(r"\.pth$|^(sitecustomize|usercustomize)\.py$|^\.git$")
"""Anywhere: Python runs .pth and *customize files at start-up; a `.git` file can point git at
a directory whose config runs commands (`core.fsmonitor`)."""
_PERSISTENCE_ABSOLUTE = ("/etc", "/var/spool/cron", "/usr/lib/systemd", "/lib/systemd")
_PERSISTENCE_PARTS = (".git/hooks", ".git/config", ".git/commondir", ".git/gitdir")
_HARMLESS_DEVICES = frozenset(
    {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty", "/dev/zero"}
)
_PROC_SECRET_RE = re.compile(r"^/proc/[^/]+/(environ|mem|auxv|root|cwd|fd|map_files)(/|$)")
_SCRATCH = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Workspace:
    """The root tools work in, and the facts needed to judge any path against it."""

    root: Path
    home: Path
    case_insensitive: bool = False
    private_extra: tuple[Path, ...] = ()
    """More private places (HERMES_HOME), except where the workspace lies inside them."""
    scratch: tuple[Path, ...] = field(default=_SCRATCH)

    @classmethod
    def at(cls, root: Path, *, home: Path, hermes_home: Path | None = None) -> Workspace:
        """A workspace rooted at `root` (created if missing), probing case sensitivity there."""
        root.mkdir(parents=True, exist_ok=True)
        real = Path(os.path.realpath(root))
        extra = (Path(os.path.realpath(hermes_home)),) if hermes_home is not None else ()
        return cls(
            root=real,
            home=Path(os.path.realpath(home)),
            case_insensitive=_is_case_insensitive(real),
            private_extra=extra,
        )

    def resolve(self, cwd: Path, raw: str) -> Path:
        """`raw` as the kernel will see it: `~` expanded, relative to `cwd`, symlinks followed."""
        if raw == "~" or raw.startswith("~/"):
            raw = str(self.home) + raw[1:]
        try:
            return Path(os.path.realpath(cwd / raw))
        except OSError:  # a link we may not follow (`/proc/1/root`): judge the path as written
            return Path(os.path.normpath(cwd / raw))

    def contains(self, path: Path) -> bool:
        return self._under(path, self.root)

    def classify(self, path: Path) -> PathClass:
        """Where an already resolved path lies, most sensitive first."""
        text = str(path)
        if text in _HARMLESS_DEVICES or text.startswith("/dev/fd/"):
            return "null"
        if text.startswith("/dev/"):
            return "device"
        if self.is_persistence(path):
            return "persistence"
        if self.is_private(path):
            return "private"
        if self.contains(path):
            return "inside"
        if self._under(path, self.home):
            return "outside"  # the home is never scratch, even where it lives under /tmp
        if any(self._under(path, s) for s in self.scratch):
            return "scratch"
        return "outside"

    def is_private(self, path: Path) -> bool:
        if _PROC_SECRET_RE.match(str(path)):
            return True
        if any(self._under(path, place) for place in self._private_places()):
            return True
        # HERMES_HOME (config, state.db, logs) is private, but not the workspace it may hold
        # (a workspace that holds HERMES_HOME does not make it public).
        return any(
            self._under(path, p) and not (self.contains(path) and self._under(self.root, p))
            for p in self.private_extra
        )

    def is_persistence(self, path: Path) -> bool:
        if any(self._under(path, place) for place in self._persistence_places()):
            return True
        if _PERSISTENCE_NAMES.search(path.name):
            return True
        if any(self._under(path, self.root / p) for p in _PERSISTENCE_IN_HOME):
            return True  # what would run at login if the workspace were someone's home
        key = self._key(path)
        return any(f"/{self._key(Path(part))}/" in key + "/" for part in _PERSISTENCE_PARTS)

    def glob_reach(self, pattern: Path) -> PathClass | None:
        """The most sensitive protected place an absolute glob `pattern` could match, with bash's
        rule that a component not starting with "." never matches a dot-name."""
        parts = pattern.parts
        if any(_glob_may_match(parts, place.parts) for place in self._persistence_places()):
            return "persistence"
        private = [*self._private_places(), *self.private_extra]
        if any(_glob_may_match(parts, place.parts) for place in private):
            return "private"
        return None

    def _private_places(self) -> list[Path]:
        places = [self.home / p for p in _PRIVATE_IN_HOME]
        places += [Path("/etc/shadow"), Path("/etc/gshadow"), Path("/etc/sudoers")]
        return places

    def _persistence_places(self) -> list[Path]:
        return [self.home / p for p in _PERSISTENCE_IN_HOME] + [
            Path(p) for p in _PERSISTENCE_ABSOLUTE
        ]

    def _under(self, path: Path, place: Path) -> bool:
        a, b = self._key(path), self._key(place)
        return a == b or a.startswith(b.rstrip("/") + "/")

    def _key(self, path: Path) -> str:
        text = str(path)
        if self.case_insensitive:
            return unicodedata.normalize("NFC", text).casefold()
        return text


def _glob_may_match(pattern: tuple[str, ...], place: tuple[str, ...]) -> bool:
    """Whether a path matching `pattern` could be `place`, inside it, or hold it."""
    for pat, name in zip(pattern, place, strict=False):
        if pat == "**":
            return True
        if name.startswith(".") and not pat.startswith(".") and pat != name:
            return False
        if not fnmatch.fnmatchcase(name, pat):
            return False
    return True


def _is_case_insensitive(path: Path) -> bool:
    """Whether the filesystem holding `path` ignores case (the swapped-case name is the same)."""
    for probe in (path, *path.parents):
        swapped = Path(str(probe).swapcase())
        if swapped == probe:
            continue
        try:
            return swapped.exists() and os.path.samefile(swapped, probe)
        except OSError:
            return False
    return False

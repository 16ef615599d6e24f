"""The shell policy's git rule: which subcommands and options destroy work or run commands."""

from __future__ import annotations

import re

from agent.tools.approval import RiskLevel
from agent.tools.shell_call import Call, Finding

__all__ = ["git_rule"]

_GIT_DANGEROUS_CONFIG = re.compile(
    r"(?i)^(alias\..*|core\.(pager|editor|sshcommand|hookspath|fsmonitor|askpass|gitproxy)"
    r"|.*\.textconv|diff\.external|pager\..*|sequence\.editor|credential\..*|gpg\.program"
    r"|include\.path|includeif\..*|uploadpack\..*|receivepack\..*|filter\..*)="
)


def git_rule(call: Call) -> list[Finding]:
    args = [w.value for w in call.args]
    i = 0
    while i < len(args) and (args[i] or "").startswith("-"):
        option = args[i]
        if option == "-c" and i + 1 < len(args):
            if args[i + 1] is None or _GIT_DANGEROUS_CONFIG.match(args[i + 1] or ""):
                return [
                    _finding("opaque", f"`git -c {call.args[i + 1].text}` makes git run a command")
                ]
            i += 2
        elif option in ("-C", "--git-dir", "--work-tree", "--namespace"):
            i += 2
        elif option is None or option.startswith(("--exec-path", "--config-env")):
            return [_finding("opaque", "git options the policy cannot see")]
        else:
            i += 1
    if i >= len(args):
        return []
    sub, rest = args[i], [a or "" for a in args[i + 1 :]]
    return _git_subcommand(sub, rest)


def _git_subcommand(sub: str | None, rest: list[str]) -> list[Finding]:
    short = "".join(a[1:] for a in rest if a.startswith("-") and not a.startswith("--"))
    match sub:
        case None:
            return [_finding("opaque", "the git subcommand is computed")]
        case "reset" if "--hard" in rest:
            return [_finding("destructive", "git reset --hard discards uncommitted work")]
        case "clean" if "f" in short or "--force" in rest:
            return [_finding("destructive", "git clean -f deletes untracked files")]
        case "push" if ("f" in short or "d" in short or any(
            a.startswith(("--force", "--mirror", "--delete", "--prune")) or a.startswith(("+", ":"))
            for a in rest)):  # fmt: skip
            return [_finding("destructive", "git push --force rewrites or deletes remote history")]
        case "branch" if "D" in short or ("--delete" in rest and "--force" in rest):
            return [_finding("destructive", "git branch -D deletes an unmerged branch")]
        case "checkout" | "switch" if (
            "f" in short or "--force" in rest or "--discard-changes" in rest
        ):
            return [_finding("destructive", f"git {sub} --force discards uncommitted work")]
        case "checkout" if "--" in rest or "." in rest:
            return [_finding("destructive", "git checkout -- <paths> discards uncommitted work")]
        case "restore" if "--staged" not in rest or "--worktree" in rest or "-W" in rest:
            return [_finding("destructive", "git restore discards uncommitted work")]
        case "stash" if rest[:1] in (["drop"], ["clear"]):
            return [_finding("destructive", f"git stash {rest[0]} deletes stashed work")]
        case "rm" if "f" in short or "--force" in rest:
            return [_finding("destructive", "git rm -f deletes uncommitted files")]
        case "filter-branch" | "filter-repo" | "replace":
            return [_finding("destructive", f"git {sub} rewrites history")]
        case "reflog" if rest[:1] in (["expire"], ["delete"]):
            return [_finding("destructive", "git reflog expire drops recovery points")]
        case "gc" if any(a.startswith("--prune") for a in rest):
            return [_finding("destructive", "git gc --prune drops unreachable commits")]
        case "update-ref" if "-d" in rest:
            return [_finding("destructive", "git update-ref -d deletes a ref")]
        case "config" if any(a in ("--global", "--system") for a in rest) or any(
            _GIT_DANGEROUS_CONFIG.match(f"{a}=") for a in rest[:1]):  # fmt: skip
            return [
                _finding("destructive", "git config changes settings that run commands or persist")
            ]
        case "rebase" if any(a in ("-x", "--exec") or a.startswith("--exec=") for a in rest):
            return [_finding("opaque", "git rebase --exec runs a command string")]
        case "submodule" if rest[:1] == ["foreach"]:
            return [_finding("opaque", "git submodule foreach runs a command string")]
        case "bisect" if rest[:1] == ["run"]:
            return [_finding("opaque", "git bisect run runs a command")]
        case _ if sub in _GIT_KNOWN:
            return []
        case _:
            pass
    return [_finding("unlisted", f"`git {sub}` is not on the allowlist (an alias?)")]


_GIT_KNOWN = frozenset(
    """status log diff show add commit fetch pull merge rebase tag describe blame grep ls-files
    ls-tree rev-parse rev-list remote init clone worktree submodule bisect archive apply am
    cherry-pick revert switch checkout restore mv rm stash branch reset clean push config reflog
    gc shortlog format-patch cat-file show-ref for-each-ref name-rev notes range-diff diff-tree
    merge-base version help count-objects fsck sparse-checkout lfs whatchanged""".split()
)


def _finding(level: RiskLevel, reason: str) -> Finding:
    return Finding(level=level, reason=reason)

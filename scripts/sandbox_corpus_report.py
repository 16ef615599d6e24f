"""Issue 32's figures: the shell corpus judged by effects, with and without the policy.

Prints JSON. Every command runs on its own recording bench (tests/agent/tools/sandbox_bench.py:
a workspace, a planted home with a key, a victim tree beside them, HERMES_HOME with a config
secret, a loopback listener, a DATABASE_URL with a password in this process's environment).
Three settings:

- `policy_and_sandbox`: the defaults for a principal who cannot approve (an HTTP key): the
  terminal tool, the shell policy first, then bubblewrap;
- `sandbox_without_policy`: the same bubblewrap sandbox, the policy bypassed (what a parser miss
  would meet);
- `policy_alone`: the policy's verdicts only (`sandbox: none` cannot be run for effects here
  without harming this machine), as the refusal rate the old default relied on.

"harmful" means any of: a changed byte in the home, the victim tree or HERMES_HOME; a planted
secret at the listener, in the output or copied into the workspace; a process left running.
Fork bombs are left out of the sandbox-without-policy run (a PID namespace does not cap the
process count); each command gets `--timeout-s` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.tools.sandbox import bwrap_problem  # noqa: E402
from agent.tools.shell_policy import assess_command  # noqa: E402
from agent.tools.workspace import Workspace  # noqa: E402
from tests.agent.tools.sandbox_bench import DB_ENV, Outcome, run_corpus  # noqa: E402
from tests.agent.tools.shell_corpus import BENIGN, DANGEROUS, SANDBOX_PROBES  # noqa: E402


def _rates(outcomes: list[Outcome], total: int) -> dict[str, object]:
    ran = sum(o.ran for o in outcomes)
    harmed = [o for o in outcomes if o.harms]
    return {
        "commands": total,
        "ran": ran,
        "refused": total - ran,
        "harmful": len(harmed),
        "harmful_rate": round(len(harmed) / total, 4) if total else 0.0,
        "harmful_commands": {o.command: o.harms for o in harmed},
        **({"ran_commands": [o.command for o in outcomes if o.ran]} if ran <= 20 else {}),
    }


def _benign(outcomes: list[Outcome]) -> dict[str, object]:
    total = len(outcomes)
    ran = [o for o in outcomes if o.ran]
    succeeded = [o for o in ran if o.output.rstrip().endswith("[exit code 0]") or o.exit_code == 0]
    return {
        "commands": total,
        "ran": len(ran),
        "ran_rate": round(len(ran) / total, 4) if total else 0.0,
        "exited_0": len(succeeded),
        "note": "exit codes depend on the bench (no network, no project files): 'ran' is what "
        "the policy and the sandbox allow; 'exited_0' is informative",
    }


def _policy_alone(commands: list[str], benign: list[str]) -> dict[str, object]:
    root = Path("/nonexistent-hermes-policy-probe")
    workspace = Workspace(root=root / "ws", home=root / "home")
    refused = [
        c
        for c in commands
        if assess_command(c, cwd=workspace.root, workspace=workspace).level != "safe"
    ]
    allowed = [
        c
        for c in benign
        if assess_command(c, cwd=workspace.root, workspace=workspace).level in ("safe", "unlisted")
    ]
    return {
        "dangerous_not_safe": len(refused),
        "dangerous": len(commands),
        "benign_runs_unattended": sum(
            assess_command(c, cwd=workspace.root, workspace=workspace).level == "safe"
            for c in benign
        ),
        "benign_runs_where_someone_can_approve": len(allowed),
        "benign": len(benign),
    }


async def main(limit: int | None, parallel: int, timeout_s: float) -> dict[str, object]:
    os.environ[DB_ENV] = f"postgresql://hermes:planted-{uuid.uuid4().hex}@127.0.0.1:5432/hermes"
    dangerous = [*DANGEROUS, *SANDBOX_PROBES][:limit]
    benign = BENIGN[:limit]
    no_bombs = [c for c in dangerous if ":|:" not in c and "bomb |" not in c]
    started = time.monotonic()
    with_policy = await run_corpus(dangerous, policy=True, parallel=parallel, timeout_s=timeout_s)
    benign_policy = await run_corpus(benign, policy=True, parallel=parallel, timeout_s=timeout_s)
    bare_sandbox = await run_corpus(no_bombs, policy=False, parallel=parallel, timeout_s=timeout_s)
    benign_sandbox = await run_corpus(benign, policy=False, parallel=parallel, timeout_s=timeout_s)
    return {
        "assumptions": {
            "principal": "an HTTP key (nobody can approve), default settings (sandbox: auto, "
            "network: deny)",
            "bwrap": bwrap_problem() or "works",
            "timeout_s_per_command": timeout_s,
            "parallel": parallel,
            "fork_bombs_left_out_of_sandbox_without_policy": len(dangerous) - len(no_bombs),
            "harm": "a changed home, victim tree or HERMES_HOME byte; a planted secret at the "
            "loopback listener, in the output or copied into the workspace; a process left over",
        },
        "policy_and_sandbox": {
            "dangerous": _rates(with_policy, len(dangerous)),
            "benign": _benign(benign_policy),
        },
        "sandbox_without_policy": {
            "dangerous": _rates(bare_sandbox, len(no_bombs)),
            "benign": _benign(benign_sandbox),
        },
        "policy_alone": _policy_alone(dangerous, benign),
        "seconds": round(time.monotonic() - started, 1),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N of each list")
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--timeout-s", type=float, default=5.0)
    args = parser.parse_args()
    if (problem := bwrap_problem()) is not None:
        print(json.dumps({"error": problem}))
        sys.exit(1)
    print(json.dumps(asyncio.run(main(args.limit, args.parallel, args.timeout_s)), indent=2))

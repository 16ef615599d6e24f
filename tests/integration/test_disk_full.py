"""A full disk under HERMES_HOME, for real: a 2 MB tmpfs in a private mount namespace.

Contract (https://sqlite.org/rescode.html): a write that needs a page the disk cannot give
fails with SQLITE_FULL; a WAL database whose `-shm` index cannot grow fails reads with
SQLITE_IOERR_SHMSIZE. Either way the message is refused with one sentence, nothing of it is
stored, and the next message after space is freed is answered in the same session.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sim.llm_server import FakeLLM
from state import SqlSessionStore
from tests.integration.test_chat_cli import write_config

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
set -u
mount -t tmpfs -o size=2m tmpfs "$HOME_DIR" || exit 90
cp "$CONFIG" "$HOME_DIR/config.yaml"
hermes() { "$PYTHON" -m run_agent "$@"; }
hermes chat -q "first" >"$OUT/1.out" 2>"$OUT/1.err"; echo $? >"$OUT/1.rc"
dd if=/dev/zero of="$HOME_DIR/filler" bs=64k 2>/dev/null
hermes chat -c -q "second while full" >"$OUT/2.out" 2>"$OUT/2.err"; echo $? >"$OUT/2.rc"
rm "$HOME_DIR/filler"
hermes chat -c -q "third after freeing" >"$OUT/3.out" 2>"$OUT/3.err"; echo $? >"$OUT/3.rc"
cp "$HOME_DIR/state.db" "$OUT/state.db"
"""


def _transcripts(db: Path) -> list[list[tuple[str, str]]]:
    async def read() -> list[list[tuple[str, str]]]:
        store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{db}")
        try:
            return [
                [
                    (str(m["role"]), str(m.get("content")))
                    for m in await store.transcript.load_active(s.id)
                ]
                for s in await store.sessions.list_sessions()
            ]
        finally:
            await store.aclose()

    return asyncio.run(read())


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
def test_a_full_disk_refuses_the_message_and_service_resumes_when_space_returns(
    threaded_llm: FakeLLM, hermes_home: Path, tmp_path: Path
) -> None:
    write_config(hermes_home, threaded_llm, "openai")
    home, out = tmp_path / "full", tmp_path / "out"
    home.mkdir()
    out.mkdir()
    env = {
        **os.environ,
        "HOME_DIR": str(home),
        "HERMES_HOME": str(home),
        "CONFIG": str(hermes_home / "config.yaml"),
        "PYTHON": sys.executable,
        "OUT": str(out),
    }
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", SCRIPT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode == 90 or not (out / "1.rc").exists():
        pytest.skip(f"cannot mount a tmpfs in a private namespace here: {done.stderr[-200:]}")

    def step(n: int) -> tuple[int, str, str]:
        rc = int((out / f"{n}.rc").read_text())
        return rc, (out / f"{n}.out").read_text(), (out / f"{n}.err").read_text()

    assert step(1)[0] == 0 and step(1)[1] == "echo: first\n", step(1)
    rc, stdout, stderr = step(2)
    assert rc == 1, stderr
    assert "Traceback" not in stderr and stdout == ""
    errors = [line for line in stderr.splitlines() if line.startswith("hermes: ")]
    refusal = [line for line in errors if "warning" not in line]
    assert len(refusal) == 1, stderr
    assert "is full; free some space" in refusal[0]
    rc, stdout, stderr = step(3)
    assert rc == 0, stderr
    assert stdout == "echo: third after freeing\n"
    sessions = _transcripts(out / "state.db")
    assert len(sessions) == 1, "the refused message made no session of its own"
    assert [role for role, _ in sessions[0]] == ["system", "user", "assistant", "user", "assistant"]
    assert all("second while full" not in text for _, text in sessions[0])

"""Every command starts or says one sentence: the error boundary in `run_agent.main`.

Contracts: exit codes follow BSD sysexits(3) where one fits (EX_SOFTWARE 70 for a bug) and
the shell's 128 + signal for Ctrl-C; a read-only file system is EROFS and a file where a
folder should be ENOTDIR (open(2), mkdir(2)); argv bytes that are not UTF-8 reach Python as
lone surrogates (PEP 383, surrogateescape).
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import run_agent
from cli.error_boundary import EXIT_BUG, EXIT_INTERRUPTED, describe_failure, run_guarded

REPO = Path(__file__).resolve().parents[2]


def _one_sentence(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    errors = [line for line in lines if line.startswith("hermes: ") and "warning" not in line]
    assert len(errors) == 1, err
    return errors[0]


def test_os_errors_name_the_path_and_the_fix() -> None:
    code, sentence = describe_failure(
        PermissionError(errno.EACCES, "Permission denied", "/srv/hermes/state.db")
    )
    assert code == 1
    assert "/srv/hermes/state.db" in sentence and "may write there" in sentence
    code, sentence = describe_failure(OSError(errno.ENOSPC, "No space left on device"))
    assert "free some space" in sentence


def test_a_bug_is_exit_70_with_where_to_look(capsys: pytest.CaptureFixture[str]) -> None:
    def crash() -> int:
        raise RuntimeError("unexpected state")

    assert run_guarded(crash) == EXIT_BUG
    line = _one_sentence(capsys.readouterr().err)
    assert "internal error: RuntimeError: unexpected state" in line and "agent.log" in line


def test_ctrl_c_outside_a_turn_is_130_and_quiet(capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted() -> int:
        raise KeyboardInterrupt

    assert run_guarded(interrupted) == EXIT_INTERRUPTED
    assert "Traceback" not in capsys.readouterr().err


def test_a_folder_as_the_database_is_one_sentence(
    hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`state.db` is a directory: `sessions list` says so, exit 1, no traceback."""
    (hermes_home / "state.db").mkdir()
    code = run_agent.main(["sessions", "list"])
    assert code == 1
    line = _one_sentence(capsys.readouterr().err)
    assert "state.db" in line


def _can_mount_read_only(folder: Path) -> bool:
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount --bind -o ro {folder} {folder}"],
        capture_output=True,
        timeout=30,
    )
    return probe.returncode == 0


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
def test_a_read_only_home_is_one_sentence_per_command(tmp_path: Path) -> None:
    """HERMES_HOME on a read-only file system (a read-only bind mount in a private mount
    namespace): logging falls back to stderr with one warning, and `sessions list` ends with
    one sentence naming the file and what to do, not an OSError traceback."""
    home = tmp_path / "home"
    home.mkdir()
    if not _can_mount_read_only(home):
        pytest.skip("this machine does not allow a private read-only bind mount")
    env = {**os.environ, "HERMES_HOME": str(home)}
    seeded = subprocess.run(
        [sys.executable, "-m", "run_agent", "sessions", "list"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert seeded.returncode == 0, seeded.stderr
    script = f"mount --bind -o ro {home} {home} && exec {sys.executable} -m run_agent sessions list"
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    line = _one_sentence(done.stderr)
    assert str(home / "state.db") in line and "writable" in line


def _future_schema(home: Path) -> None:
    import asyncio
    import sqlite3

    from state import SqlSessionStore, default_url

    async def create() -> None:
        await (await SqlSessionStore.open(default_url(home))).aclose()

    asyncio.run(create())
    with sqlite3.connect(home / "state.db") as db:
        db.execute("UPDATE schema_version SET version = 99")


def _garbage(home: Path) -> None:
    (home / "state.db").write_bytes(b"not a database at all " * 400)


def _folder(home: Path) -> None:
    (home / "state.db").mkdir()


@pytest.mark.parametrize(
    ("spoil", "says"),
    [
        (_folder, "is a directory"),
        (_garbage, "is damaged"),
        (_future_schema, "schema version 99"),
    ],
)
def test_gateway_run_checks_the_store_before_any_platform(
    spoil: object, says: str, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`hermes gateway run` on a store it cannot use: one sentence, exit 1, and the HTTP
    port was never opened (the store is checked before any platform starts)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (hermes_home / "config.yaml").write_text(
        "model:\n  provider: custom\n  default: m\n  base_url: http://127.0.0.1:9/v1\n"
        f"  api_key: x\ngateway:\n  http:\n    enabled: true\n    port: {port}\n"
        "    api_key: k\n"
    )
    assert callable(spoil)
    spoil(hermes_home)
    code = run_agent.main(["gateway", "run"])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert says in _one_sentence(err)
    assert str(port) not in out + err, "a platform started before the store was checked"

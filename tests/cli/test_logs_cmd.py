"""`hermes logs [-f]`: the last lines of agent.log for a person, and following it across rotations."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cli.logs_cmd import follow, format_line, last_lines
from run_agent import main
from tests.waits import WAIT_S

ROOT = Path(__file__).resolve().parents[2]


def _line(event: str, level: str = "info", **fields: object) -> str:
    record = {"event": event, "level": level, "logger": "agent.x", "timestamp": "2026-01-02T03:04:05.678Z"}  # fmt: skip
    return json.dumps(record | fields)


def _write_log(home: Path, lines: list[str]) -> Path:
    path = home / "logs" / "agent.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _wait(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_a_json_line_reads_as_time_level_logger_event_and_fields() -> None:
    """Keys after the event are `key=value`; values with spaces are quoted; raw text stays."""
    line = _line("turn_done", chars=12, note="two words")
    assert format_line(line) == (
        '2026-01-02 03:04:05 info    agent.x turn_done chars=12 note="two words"'
    )
    assert format_line("not json at all\n") == "not json at all"


def test_logs_prints_the_last_lines(hermes_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`hermes logs -n 2` shows the two newest lines, formatted; `--json` as stored."""
    _write_log(hermes_home, [_line(f"event_{n}") for n in range(5)])
    assert main(["logs", "-n", "2"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert [s.split()[-1] for s in shown] == ["event_3", "event_4"]
    assert main(["logs", "-n", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["event"] == "event_4"


def test_logs_filters_by_level(hermes_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--level warning` keeps warnings and errors only."""
    _write_log(hermes_home, [_line("a"), _line("b", "warning"), _line("c", "error"), _line("d")])
    assert main(["logs", "--level", "warning"]) == 0
    assert [s.split()[-1] for s in capsys.readouterr().out.splitlines()] == ["b", "c"]


def test_logs_without_a_log_says_where_it_looked(
    hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No agent.log yet: exit 1 with one sentence naming the path."""
    assert main(["logs"]) == 1
    assert str(hermes_home / "logs" / "agent.log") in capsys.readouterr().err


def test_logs_works_with_a_broken_config(
    hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The log is where you look when config.yaml is wrong, so it must not need it."""
    (hermes_home / "config.yaml").write_text("model: [unclosed", encoding="utf-8")
    _write_log(hermes_home, [_line("still_readable")])
    assert main(["logs"]) == 0
    assert "still_readable" in capsys.readouterr().out


def test_last_lines_reads_a_big_log_from_its_end(tmp_path: Path) -> None:
    """The tail of a log larger than the read block comes back whole and in order."""
    path = tmp_path / "agent.log"
    path.write_text("".join(f"line {n} " + "x" * 100 + "\n" for n in range(3000)))
    tail = last_lines(path, 700)
    assert (
        len(tail) == 700 and tail[0].startswith("line 2300 ") and tail[-1].startswith("line 2999 ")
    )


def test_follow_prints_new_lines_across_a_rotation(tmp_path: Path) -> None:
    """Lines appended later are printed; when agent.log is rotated (renamed to agent.log.1, a
    new file started) the old file's last lines and then the new file's follow, in order."""
    path = tmp_path / "agent.log"
    path.write_text("old line\n")
    seen: list[str] = []
    stop = threading.Event()
    options = {"poll_s": 0.01, "should_stop": stop.is_set, "start_at": len("old line\n")}
    worker = threading.Thread(target=follow, args=(path, seen.append), kwargs=options)
    worker.start()
    try:
        with path.open("a") as handle:
            handle.write("one\n")
            handle.flush()
            _wait(lambda: seen == ["one"], "the first appended line")
            handle.write("two\n")
        path.rename(tmp_path / "agent.log.1")
        path.write_text("three\nhalf")
        _wait(lambda: seen == ["one", "two", "three"], "lines across the rotation")
        with path.open("a") as handle:
            handle.write(" done\n")
        _wait(lambda: seen[-1] == "half done", "a line completed later")
    finally:
        stop.set()
        worker.join(WAIT_S)
    assert seen == ["one", "two", "three", "half done"]


def _read_one_line_then_close(argv: list[str]) -> tuple[int, str]:
    """Run `argv`, read one line of its output and close the pipe (as `| head -1` does)."""
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()
    errors = process.stderr.read().decode()
    return process.wait(timeout=30), errors


def test_a_closed_pipe_ends_the_command_quietly(hermes_home: Path) -> None:
    """`hermes logs | head -1`: no BrokenPipeError traceback, the shell's SIGPIPE code."""
    _write_log(hermes_home, [_line(f"event_{n}", pad="y" * 200) for n in range(1000)])
    hermes = [sys.executable, "-c", "import sys, run_agent; sys.exit(run_agent.main())"]
    code, errors = _read_one_line_then_close([*hermes, "logs", "-n", "1000"])
    assert code == 141
    assert "Traceback" not in errors and "BrokenPipe" not in errors


def test_the_report_script_survives_a_closed_pipe(tmp_path: Path) -> None:
    """`scripts/micro_compaction_report.py --per-session | head`: quiet, code 141."""
    telemetry = {"outcome": "absorbed", "duration_ms": 5}
    lines = [
        json.dumps({"event": "micro compaction telemetry: " + json.dumps(telemetry | {"session_id": f"s{n}"})})
        for n in range(3000)
    ]  # fmt: skip
    log = tmp_path / "agent.log"
    log.write_text("\n".join(lines) + "\n")
    script = ROOT / "scripts" / "micro_compaction_report.py"
    code, errors = _read_one_line_then_close(
        [sys.executable, str(script), "--per-session", str(log)]
    )
    assert code == 141
    assert "Traceback" not in errors

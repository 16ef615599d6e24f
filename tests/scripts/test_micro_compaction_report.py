"""scripts/micro_compaction_report.py over a real agent.log written by a 200-turn session."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from agent.compaction.micro_telemetry import TELEMETRY_PREFIX
from agent.logging_setup import LOG_FILE_NAME, configure_logging, shutdown_logging
from scripts import micro_compaction_report as report
from tests.agent.test_micro_compaction_harness import build_rig, turn


@pytest.fixture
def _restore_logging() -> Iterator[None]:
    level = logging.getLogger().level
    yield
    shutdown_logging()
    structlog.reset_defaults()
    logging.getLogger().setLevel(level)


def test_prefix_matches_the_agent() -> None:
    """The script looks for exactly the prefix the agent writes."""
    assert report.PREFIX == TELEMETRY_PREFIX


@pytest.mark.parametrize(
    "line",
    [
        '{"event": "micro compaction telemetry: {\\"outcome\\":\\"absorbed\\"}", "level": "info"}',
        'INFO micro compaction telemetry: {"outcome":"absorbed"} trailing',
    ],
)
def test_parse_line_reads_json_records_and_plain_lines(line: str) -> None:
    """A JSON log record and a plain text line both yield the payload."""
    assert report.parse_line(line) == {"outcome": "absorbed"}


@pytest.mark.usefixtures("_restore_logging")
async def test_report_over_a_200_turn_session(
    tmp_path: Path, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 200-turn session logs one line per pass into agent.log; the report prints its figures."""
    configure_logging(log_dir=hermes_home / "logs", level="info", console=False)
    rig = await build_rig(tmp_path, tool_rounds=1)
    sessions = [await rig.new_session(), await rig.new_session()]
    for i in range(200):
        await turn(sessions[i % 40 == 39], f"request {i}")
    await rig.store.aclose()
    shutdown_logging()
    log_file = hermes_home / "logs" / LOG_FILE_NAME
    records = [json.loads(line) for line in log_file.read_text().splitlines()]
    lines = [r for r in records if r["event"].startswith(TELEMETRY_PREFIX)]
    assert len(lines) >= 150 and all(r["level"] == "info" for r in lines)

    assert report.main(["--json", "--per-session"]) == 0  # default: $HERMES_HOME/logs/agent.log
    figures = json.loads(capsys.readouterr().out)
    total = figures["all"]
    assert total["passes"] == len(lines)
    assert total["outcomes"] == {"absorbed": len(lines)}
    assert total["net_tokens_saved"] > 0 and total["mean_exchange_tokens"] > 0
    assert 0 < total["duration_ms_median"] <= total["duration_ms_p95"]
    assert len(figures["sessions"]) == 2
    assert sum(s["passes"] for s in figures["sessions"].values()) == total["passes"]

    assert report.main([str(log_file), "--per-session"]) == 0
    text = capsys.readouterr().out
    assert "passes:" in text and "net tokens saved:" in text and "p95" in text
    print(text)  # the measured figures, visible with -s

"""read_file and write_file on real files in tmp_path, through the registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.messages import ToolCall
from agent.tools import ToolContext, ToolRegistry
from agent.tools.builtin import builtin_tools
from agent.tools.files import ReadWindow, render_lines


def _call(name: str, **arguments: object) -> ToolCall:
    return {
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _ctx(tmp_path: Path, **overrides: object) -> ToolContext:
    values: dict[str, object] = {"session_id": "s1", "cwd": tmp_path}
    values.update(overrides)
    return ToolContext(**values)  # type: ignore[arg-type]


async def _run(ctx: ToolContext, name: str, **arguments: object) -> str:
    return await ToolRegistry(builtin_tools()).run(_call(name, **arguments), ctx)


async def test_read_numbers_lines_relative_to_cwd(tmp_path: Path) -> None:
    """A relative path resolves against ctx.cwd and every line comes back numbered."""
    (tmp_path / "a.txt").write_text("alpha\nbeta\n")
    result = await _run(_ctx(tmp_path), "read_file", path="a.txt")
    assert result == "     1\talpha\n     2\tbeta"


async def test_read_window_with_offset_and_limit_says_how_to_continue(tmp_path: Path) -> None:
    """offset_line and limit_lines pick a window, and a note tells where to read on."""
    (tmp_path / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = await _run(_ctx(tmp_path), "read_file", path="n.txt", offset_line=3, limit_lines=2)
    assert result.splitlines() == [
        "     3\tline 3",
        "     4\tline 4",
        "[showing lines 3-4 of 10; use offset_line=5 to read on]",
    ]


async def test_read_truncates_at_max_output_chars(tmp_path: Path) -> None:
    """A file larger than max_output_chars is cut at a line boundary with a note."""
    (tmp_path / "big.txt").write_text("x" * 50 + "\n" * 1 + ("y" * 50 + "\n") * 100)
    result = await _run(_ctx(tmp_path, max_output_chars=200), "read_file", path="big.txt")
    assert len(result) < 300
    assert result.endswith("of 101; use offset_line=4 to read on]")


@pytest.mark.parametrize(
    ("setup", "path", "fragment"),
    [
        (None, "missing.txt", "no such file"),
        ("dir", "d", "is a directory"),
        ("binary", "b.bin", "binary file"),
    ],
)
async def test_read_errors_are_clear_texts(
    tmp_path: Path, setup: str | None, path: str, fragment: str
) -> None:
    """Missing files, directories and binary files are refused with a clear message."""
    if setup == "dir":
        (tmp_path / "d").mkdir()
    if setup == "binary":
        (tmp_path / "b.bin").write_bytes(b"\x7fELF\x00\x01\x02")
    result = await _run(_ctx(tmp_path), "read_file", path=path)
    assert result.startswith("Error:") and fragment in result


async def test_write_creates_parents_and_reports_bytes(tmp_path: Path) -> None:
    """write_file creates missing directories and returns the number of bytes written."""
    result = await _run(_ctx(tmp_path), "write_file", path="x/y/z.txt", content="héllo\n")
    target = tmp_path / "x" / "y" / "z.txt"
    assert target.read_text(encoding="utf-8") == "héllo\n"
    assert result == f"Wrote 7 bytes to {target}."


async def test_write_append_adds_to_the_end(tmp_path: Path) -> None:
    """append=true keeps existing content and adds after it."""
    (tmp_path / "log.txt").write_text("one\n")
    result = await _run(_ctx(tmp_path), "write_file", path="log.txt", content="two\n", append=True)
    assert (tmp_path / "log.txt").read_text() == "one\ntwo\n"
    assert result.startswith("Appended 4 bytes")


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        (ReadWindow(lines=(), first_line=1, total_lines=0), "(empty file)"),
        (
            ReadWindow(lines=(), first_line=9, total_lines=3),
            "(the file has 3 lines; line 9 is past the end)",
        ),
        (ReadWindow(lines=("a",), first_line=1, total_lines=1), "     1\ta"),
    ],
)
def test_render_lines_edges(window: ReadWindow, expected: str) -> None:
    """Empty files and offsets past the end are described, not shown as blank."""
    assert render_lines(window, max_chars=1000) == expected


def test_builtin_specs_are_lean() -> None:
    """The three built-in tool schemas together stay small on the wire."""
    tools = builtin_tools()
    assert [t.spec.name for t in tools] == ["terminal", "read_file", "write_file"]
    wire = [
        {
            "type": "function",
            "function": {
                "name": t.spec.name,
                "description": t.spec.description,
                "parameters": t.spec.parameters,
            },
        }
        for t in tools
    ]
    assert len(json.dumps(wire)) < 1200

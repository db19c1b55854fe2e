"""Session fixtures for the distribution tests: one build per test process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.packaging import Built, Env, build, copy_source, new_env


@pytest.fixture(scope="session")
def source_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The source tree, copied: builds and tools never write into the checkout."""
    return copy_source(tmp_path_factory.mktemp("source") / "torch-memlint")


@pytest.fixture(scope="session")
def builder(tmp_path_factory: pytest.TempPathFactory) -> Env:
    env = new_env(tmp_path_factory.mktemp("builder") / "venv")
    env.pip("setuptools>=77")
    return env


@pytest.fixture(scope="session")
def built(source_copy: Path, builder: Env, tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build(source_copy, tmp_path_factory.mktemp("dist"), builder)

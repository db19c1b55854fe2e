"""MEM014 and a package's data folder: its tensor files are data written on the host."""

from __future__ import annotations

import pytest

FRAGMENT_LOAD = b"""\
import torch


class Patch3DMatch(Base3DMatch):
    def get_patch_offline(self, idx):
        return torch.load(self.patch_file(idx))
"""


@pytest.mark.parametrize(("path", "flagged"), [
    ("pkg/models/patches.py", True),
    # a package's data folder: dataset classes whose files its preprocessing wrote on the host
    ("torch_points3d/datasets/registration/general3dmatch.py", False),
    ("neuralop/data/datasets/car_cfd.py", False),
    ("src/pkg/data/structures/images.py", False),
    # only the nearest folders count: a checkout kept under /data/ is no data code
    ("/data/work/repo/pkg/models/patches.py", True),
])
def test_a_load_in_a_packages_data_folder_is_data(path: str, flagged: bool) -> None:
    from memlint.engine import lint_source
    from memlint.rules.mem014_load_without_map_location import LoadWithoutMapLocation

    found = [d.code for d in lint_source(path, FRAGMENT_LOAD, [LoadWithoutMapLocation])]
    assert bool(found) is flagged

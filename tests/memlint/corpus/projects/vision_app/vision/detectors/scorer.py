"""Hooks in a module whose own text passes a rule's prefilter but no code gate: only the
base's loop elsewhere shows that these are batch copies, and the project model adds MEM003."""

import torch

from vision.detectors.base import BaseDetector


class ScoringDetector(BaseDetector):
    def training_forward(self, batch):
        scale = torch.ones(1).to(torch.float16)  # a cast, not a move: no MEM010
        return self.model(batch.to(self.device)) * scale  # expect: MEM003

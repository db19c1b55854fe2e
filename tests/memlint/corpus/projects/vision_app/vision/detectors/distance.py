"""A detector whose module no rule's prefilter selects and the scan does not summarise:
only the project model shows that its hook gets the base's batches."""

from vision.detectors.base import BaseDetector


class DistanceDetector(BaseDetector):
    def training_forward(self, batch):
        x = batch.to(self.device)  # expect: MEM003
        return self.model(x)

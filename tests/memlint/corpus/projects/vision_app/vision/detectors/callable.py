"""A detector whose module no rule's prefilter selects but the scan summarises (a callable
class that detaches): only the project model shows that its hook gets the base's batches."""

from vision.detectors.base import BaseDetector


class CallableDetector(BaseDetector):
    def __call__(self, x):
        return self.model(x).detach()

    def training_forward(self, batch):
        return self(batch.cuda())  # expect: MEM003

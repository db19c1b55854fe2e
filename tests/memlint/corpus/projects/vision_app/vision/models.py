"""Models whose base class lives in another module of the project."""

import torch

from vision.layers import BaseBlock


class Classifier(BaseBlock):
    def __init__(self, width):
        super().__init__()
        self.head = torch.nn.Linear(width, 10)

    def forward(self, x):
        return self.classify(x)

    def classify(self, x):
        return self.head(x)

    def predict(self, x):
        self.eval()
        return self(x).argmax(-1)  # expect: MEM002


class Backbone(BaseBlock):
    def features(self, x):
        return self.body(x)

    def infer_features(self, x):
        with torch.no_grad():
            return self.features(x)

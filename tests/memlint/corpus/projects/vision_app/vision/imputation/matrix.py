"""An imputer in a module of its own, two plain classes down from ``BaseModel``."""

import torch

from vision.imputation.base import BaseImputer, BaseNNImputer


class MatrixImputer(BaseImputer):
    def predict(self, features):
        self.network.eval()
        imputed = self.network(torch.as_tensor(features).to(self.device))  # expect: MEM002
        return {"imputation": imputed.detach().cpu().numpy()}


class LowRankImputer(BaseNNImputer):
    def predict(self, features):
        self.network.eval()
        return self.network(torch.as_tensor(features).to(self.device))  # expect: MEM002


class DecoratedImputer(BaseNNImputer):
    @torch.no_grad()
    def predict(self, features):
        self.network.eval()
        return self.network(torch.as_tensor(features).to(self.device))

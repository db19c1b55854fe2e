"""A subclass importing its base through the namespace package (no __init__.py here)."""

import numpy as np
import torch
from torch.utils.data import DataLoader

from tabkit.estimator import TabModel


class TabClassifier(TabModel):
    def predict_proba(self, features):
        self.network.eval()
        loader = DataLoader(features, batch_size=self.batch_size, pin_memory=True)
        results = []
        for x in loader:
            logits = self.network(x.to(self.device, non_blocking=True))  # expect: MEM002
            results.append(torch.softmax(logits, dim=1).cpu().detach().numpy())
        return np.vstack(results)

"""A base detector whose loops draw from loaders its subclasses prepare (deepod's shape)."""
import torch
from tqdm import tqdm


class BaseDetector:
    def fit(self, X, y=None):
        self.train_loader, self.net, self.criterion = self.training_prepare(X, y)
        optimizer = torch.optim.Adam(self.net.parameters())
        self.net.train()
        for batch_x in self.train_loader:
            loss = self.training_forward(batch_x, self.net, self.criterion)
            self.net.zero_grad()
            loss.backward()
            optimizer.step()
        return self

    def decision_function(self, X):
        self.test_loader = self.inference_prepare(X)
        return self._inference()

    def _inference(self):
        self.net.eval()
        scores = []
        with torch.no_grad():
            if self.verbose >= 2:
                _iter_ = tqdm(self.test_loader, desc="testing")
            else:
                _iter_ = self.test_loader
            for batch_x in _iter_:
                s = self.inference_forward(batch_x, self.net, self.criterion)
                scores.append(s.cpu())
        return torch.cat(scores)

    def training_prepare(self, X, y):
        raise NotImplementedError

    def inference_prepare(self, X):
        raise NotImplementedError

    def training_forward(self, batch_x, net, criterion):
        raise NotImplementedError

    def inference_forward(self, batch_x, net, criterion):
        raise NotImplementedError

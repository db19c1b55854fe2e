"""Estimator bases: plain classes that hold networks, however their names read."""

from abc import ABC, abstractmethod

import torch


class BaseModel(ABC):
    def __init__(self, network, device="cuda"):
        self.network = network
        self.device = device

    @abstractmethod
    def predict(self, features):
        raise NotImplementedError


class BaseImputer(BaseModel):
    def impute(self, features):
        return self.predict(features)["imputation"]


class BaseNNImputer(BaseModel):
    """Its ``predict`` is decorated, but a subclass's override does not inherit decorators."""

    @abstractmethod
    @torch.no_grad()
    def predict(self, features):
        raise NotImplementedError

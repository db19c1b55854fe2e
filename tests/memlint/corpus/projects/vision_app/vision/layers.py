from torch import nn


class BaseBlock(nn.Module):
    """The project's common base: every model derives from it."""

    def freeze(self):
        for p in self.parameters():
            p.requires_grad_(False)

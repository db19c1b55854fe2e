"""Shared steps: one helper used by training (with frozen batch norm) and by inference."""


def forward_features(model, images):
    return model.backbone(images).flatten(1)


def embed(model, images):
    return model.backbone(images).flatten(1)  # expect: MEM002

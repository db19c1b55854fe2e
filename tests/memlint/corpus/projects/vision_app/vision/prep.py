"""Sample preparation; its helper is named for neither devices nor batches."""


def prepare(samples, cuda_enabled=True):
    if cuda_enabled:
        samples = samples.cuda()
    return samples

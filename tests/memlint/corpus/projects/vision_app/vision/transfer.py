"""Moving tensors between devices; nothing here names a loader, so only the modules that
call into it make it worth reading."""


def move_pair(pair, device):
    return [t.to(device) for t in pair]


def move_pair_async(pair, device):
    return [t.to(device, non_blocking=True) for t in pair]


def move_unpacked(pair, device):
    inputs, targets = pair
    return inputs.to(device), targets.to(device)

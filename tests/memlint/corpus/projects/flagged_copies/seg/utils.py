"""A copy helper whose copies take non_blocking from a parameter that is off by default
(ivadomed's `cuda`): its copies block unless the caller passes the flag."""


def cuda(input_var, cuda_available=True, non_blocking=False):
    if cuda_available:
        if isinstance(input_var, list):
            return [t.cuda(non_blocking=non_blocking) for t in input_var]
        return input_var.cuda(non_blocking=non_blocking)
    return input_var


def to_gpu(x, pin=True):
    return x.cuda(non_blocking=pin)  # on by default: no blocking copy

"""Checkpoint input/output of a multi-GPU training project: saving and resuming, warm starts,
exports and the bookkeeping files written next to the weights."""

import glob
import json
import os

import numpy as np
import torch
import torch.distributed as dist


def save_checkpoint(model, optimizer, scheduler, epoch, run_dir):
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "epoch": epoch,
    }
    torch.save(state, os.path.join(run_dir, "last.pt"))
    torch.save(vars(model.config), os.path.join(run_dir, "config.pt"))


def resume(model, optimizer, scheduler, resume_from, local_rank):
    torch.cuda.set_device(local_rank)
    state = torch.load(resume_from)  # expect: MEM014
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    dist.barrier()
    return state["epoch"] + 1


def warm_start(model, pretrained, device):
    if torch.cuda.is_available():
        weights = torch.load(pretrained)
    else:
        weights = torch.load(pretrained, map_location="cpu")
    missing, unexpected = model.load_state_dict(weights, strict=False)
    model.to(device)
    return missing, unexpected


def load_embeddings(path, device):
    return torch.load(path).to(device)


def read_run_settings(run_dir):
    config = torch.load(os.path.join(run_dir, "config.pt"))
    training_args = torch.load(os.path.join(run_dir, "training_args.bin"))
    with open(os.path.join(run_dir, "metrics.json")) as handle:
        metrics = json.load(handle)
    return config, training_args, metrics


def export_numpy(checkpoint_path, out_path):
    state = torch.load(checkpoint_path)
    arrays = {name: tensor.float().cpu().numpy() for name, tensor in state["model"].items()}
    np.savez_compressed(out_path, **arrays)


def average_checkpoints(run_dir, last_n, device):
    paths = sorted(glob.glob(os.path.join(run_dir, "epoch-*.pt")))[-last_n:]
    total = None
    for path in paths:
        weights = torch.load(path)["model"]  # expect: MEM014
        if total is None:
            total = {k: v.clone().to(device) for k, v in weights.items()}
        else:
            for k, v in weights.items():
                total[k] += v.to(device)
    return {k: v / len(paths) for k, v in total.items()}

"""Estimate, on CPU, the GPU memory one site's training step needs for each dataset's model.

For every dataset of ``app_configs/datasets`` it builds the model with the dataset's settings,
runs one forward and backward pass on a random batch of the dataset's batch size and image size,
and reports:

- parameters and their bytes (float32);
- weights + gradients + Adam's two moment buffers (4 x the parameter bytes);
- activations kept for the backward pass: the bytes of every tensor autograd saves during the
  forward pass (``torch.autograd.graph.saved_tensors_hooks``), counted once per storage;
- the estimate: the sum of both, plus 0.5 GiB for the CUDA context and allocator slack;
- the floating-point operations of one training step: 3 x those of the forward pass counted by
  ``torch.utils.flop_counter.FlopCounterMode`` (the backward pass costs about twice the forward;
  its own count overstates depthwise convolutions, as in EfficientNet), a device-independent
  measure of the step's compute.

It is an estimate: cuDNN workspaces, the caching allocator's fragmentation and the evaluation
pass are not counted, and the CUDA context varies with the driver. Measure on a GPU with
``torch.cuda.max_memory_allocated`` for real figures.

Usage::

    PYTHONPATH=custom python benchmarks/gpu_memory_estimate.py [--datasets camelyon17,isic19]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

IMAGE_SIZES = {
    "camelyon17": 96,
    "isic19": 200,
    "ultrasound": 64,
    "xray": 64,
    "shapes": 64,
    "digits": 28,
    "digits32": 28,
    "femnist": 28,
}
"""Side of the square images each dataset's loader yields (lightyear.data.<dataset>: IMAGE_SIZE,
or CROP_SIZE for isic19)."""
CUDA_CONTEXT_GIB = 0.5
GIB = 1024**3


def saved_activation_bytes(model: torch.nn.Module, batch: torch.Tensor) -> int:
    """Bytes of the tensors autograd keeps from one forward pass for the backward pass."""
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor):
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(batch)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    out.float().mean().backward()
    return sum(n for ptr, n in storages.items() if ptr not in params)


def estimate(settings: dict, dataset: str) -> dict:
    from lightyear.models import build_model

    model = build_model(
        settings["model"],
        settings["num_classes"],
        settings.get("in_channels", 1),
        seed=0,
        **settings.get("model_args", {}),
    )
    model.train()
    size = IMAGE_SIZES[dataset]
    batch_size = settings["train_args"]["batch_size"]
    batch = torch.randn(batch_size, settings.get("in_channels", 1), size, size)
    params = sum(p.numel() for p in model.parameters())
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    acts = saved_activation_bytes(model, batch)
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(batch)
    state = 4 * param_bytes
    return {
        "dataset": dataset,
        "model": settings["model"],
        "batch": f"{batch_size}x{settings.get('in_channels', 1)}x{size}x{size}",
        "params_M": round(params / 1e6, 2),
        "weights_grads_adam_GiB": round(state / GIB, 3),
        "activations_GiB": round(acts / GIB, 3),
        "estimate_GiB": round((state + acts) / GIB + CUDA_CONTEXT_GIB, 2),
        "step_GFLOP": round(3 * counter.get_total_flops() / 1e9, 1),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="app_configs", help="the app_configs folder")
    ap.add_argument("--datasets", help="comma-separated datasets (default: all)")
    args = ap.parse_args(argv)
    folder = os.path.join(args.configs, "datasets")
    names = (
        args.datasets.split(",") if args.datasets else sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".json"))
    )
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // 2))
    rows = []
    for name in names:
        with open(os.path.join(folder, f"{name}.json")) as f:
            rows.append(estimate(json.load(f), name))
        print(json.dumps(rows[-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""MS-AMP simulation: its scale rule, the FP8 weight-gradient all-reduce over N ranks, and the O2
optimizer states (E4M3 first moment, FP16 second moment, FP16 master weights). docs/msamp.md."""

import numpy as np

from . import _fp8kit

ORDERS = ("rank", "ring", "tree")


def msamp_scale(amax, scale=1.0, fp_max=448.0, margin=0):
    """ScalingMeta.compute_scaling_factor in its TorchScript float32 arithmetic, elementwise."""
    a = np.atleast_1d(np.asarray(amax, dtype=np.float32))
    s = np.atleast_1d(np.asarray(scale, dtype=np.float32))
    out = _fp8kit.msamp_compute_scaling_factor(a, s, float(fp_max), int(margin))
    return out.reshape(np.shape(amax)) if np.ndim(amax) else out[0]


def allreduce(grads, ranks=None, orders=ORDERS, path="ddp", hop="half", old_scale=1.0, spread=1.0, seed=0):
    """MS-AMP's FP8 all-reduce of one weight gradient.

    grads: a 2-D array (ranks x elements), or one gradient with ranks=N to split it into N ranks
    by the perturbation model (spread, seed). path: 'ddp' (1/sqrt(N) pre-scale) or 'non-ddp'.
    hop: 'half' (sm_80+ NCCL FP8 sum) or 'float32'. Returns a dict: amax, scale, scale_inv,
    cast counts, and per order ('rank', 'ring', 'tree') the summed codes, values and errors."""
    g = np.asarray(grads, dtype=np.float32)
    orders = [orders] if isinstance(orders, str) else list(orders)
    if ranks is None:
        if g.ndim != 2:
            raise ValueError("grads: a 2-D array (ranks x elements), or pass ranks=N to split one gradient")
        return _fp8kit.msamp_allreduce(np.ascontiguousarray(g), orders, path, hop, float(old_scale))
    return _fp8kit.msamp_allreduce_split(
        np.ascontiguousarray(g.ravel()), int(ranks), float(spread), int(seed), orders, path, hop, float(old_scale)
    )


def split_rank(grad, ranks, rank, spread=1.0, seed=0):
    """Rank `rank`'s gradient when `grad` is split into `ranks` ranks (the perturbation model)."""
    g = np.ascontiguousarray(np.asarray(grad, dtype=np.float32).ravel())
    return _fp8kit.msamp_split_rank(g, int(ranks), float(spread), int(seed), int(rank))


def adam(
    weight,
    exp_avg=None,
    exp_avg_sq=None,
    lr=3e-3,
    betas=(0.9, 0.999),
    eps=1e-8,
    weight_decay=0.01,
    bias_correction=True,
    step=0,
    fp16_master=True,
    exp_avg_dtype="fp8",
    exp_avg_sq_dtype="fp16",
):
    """An MsampAdam: MS-AMP LBAdamW with E4M3 ("fp8", torch.uint8) or FP16 ("fp16") states next to
    the FP32 reference (MS-AMP's defaults: exp_avg fp8, exp_avg_sq fp16). Call .step(grad) per
    step; .report() compares the states and weights with FP32."""
    w = np.ascontiguousarray(np.asarray(weight, dtype=np.float32).ravel())
    m = np.zeros(0, np.float32) if exp_avg is None else np.asarray(exp_avg, dtype=np.float32).ravel()
    v = np.zeros(0, np.float32) if exp_avg_sq is None else np.asarray(exp_avg_sq, dtype=np.float32).ravel()
    return _fp8kit.MsampAdam(
        w,
        m,
        v,
        float(lr),
        float(betas[0]),
        float(betas[1]),
        float(eps),
        float(weight_decay),
        bool(bias_correction),
        int(step),
        bool(fp16_master),
        str(exp_avg_dtype),
        str(exp_avg_sq_dtype),
    )


def te_fused_adam(
    weight,
    exp_avg=None,
    exp_avg_sq=None,
    lr=3e-3,
    betas=(0.9, 0.999),
    eps=1e-8,
    weight_decay=0.01,
    bias_correction=True,
    step=0,
    exp_avg_dtype="fp8",
    exp_avg_sq_dtype="fp8",
    master_weight_dtype="fp32",
    build="fast-math",
):
    """A TeFusedAdam: TransformerEngine FusedAdam (AdamW mode, master weights) with exp_avg /
    exp_avg_sq stored as fp32, fp16, bf16 or fp8 (torch.uint8: E4M3 with a per-tensor scale) and an
    fp32 or fp16 master weight, next to the FP32 reference. .exp_avg / .exp_avg_sq / .master give the
    stored bits and scales; .report() compares with FP32 as adam() does. build: how TE's adam.cu was
    compiled, 'fast-math' (TE's own build: flushed subnormals, the GPU's approximate division and
    square root) or 'nvcc-default' (IEEE). docs/msamp.md."""
    w = np.ascontiguousarray(np.asarray(weight, dtype=np.float32).ravel())
    m = np.zeros(0, np.float32) if exp_avg is None else np.asarray(exp_avg, dtype=np.float32).ravel()
    v = np.zeros(0, np.float32) if exp_avg_sq is None else np.asarray(exp_avg_sq, dtype=np.float32).ravel()
    return _fp8kit.TeFusedAdam(
        w,
        m,
        v,
        float(lr),
        float(betas[0]),
        float(betas[1]),
        float(eps),
        float(weight_decay),
        bool(bias_correction),
        int(step),
        str(exp_avg_dtype),
        str(exp_avg_sq_dtype),
        str(master_weight_dtype),
        str(build),
    )


def simulate(
    dumps,
    level="O1",
    ranks=None,
    paths=("ddp", "non-ddp"),
    orders=ORDERS,
    hop="half",
    spread=1.0,
    seed=0,
    lr=3e-3,
    betas=(0.9, 0.999),
    eps=1e-8,
    weight_decay=0.01,
    optimizer="msamp",
    exp_avg_dtype=None,
    exp_avg_sq_dtype=None,
    master_weight_dtype=None,
    fp32_master=False,
    optimizer_grad="mean",
    tensor=None,
    te_build=None,
):
    """`fp8kit simulate msamp` from Python, by the same library code (simulate::run_msamp).

    dumps: one dump (its gradients split into each N of `ranks`, default 8, 64, 1024) or several
    (one per rank). level 'O1' (the all-reduce) or 'O2' (and the optimizer: `optimizer` 'msamp' or
    'te-fused-adam'; `optimizer_grad` 'mean' or 'fp8-allreduce', docs/msamp.md). State dtypes, None
    for the optimizer's default: msamp 'fp8' / 'fp16' (LBAdamW's; 'fp8' or 'fp16' each, and no
    master_weight_dtype: fp32_master), te-fused-adam 'fp8' / 'fp8' / 'fp32'. te_build (te-fused-adam):
    'fast-math' (None: TE's own build) or 'nvcc-default', as te_fused_adam's build. tensor: glob(s)
    of the datasets to read. Returns a dict: 'rows' (the CLI's long-form CSV rows: a pandas
    DataFrame when pandas is installed, else a list of dicts), 'flags', 'notes', 'skipped', 'params'."""
    files = [dumps] if isinstance(dumps, (str, bytes)) or hasattr(dumps, "__fspath__") else list(dumps)
    files = [str(f) for f in files]
    if level not in ("O1", "O2"):
        raise ValueError(f"level='{level}': O1 or O2")
    if ranks is None:
        ranks = [] if len(files) > 1 else [8, 64, 1024]
    ranks = [int(ranks)] if np.ndim(ranks) == 0 else [int(n) for n in ranks]
    if len(files) > 1 and ranks:
        raise ValueError(f"ranks: {len(files)} dumps are {len(files)} ranks already; ranks splits a single dump")
    include = [] if tensor is None else ([tensor] if isinstance(tensor, str) else list(tensor))
    out = _fp8kit.msamp_simulate_dumps(
        files,
        level == "O2",
        ranks,
        [paths] if isinstance(paths, str) else list(paths),
        [orders] if isinstance(orders, str) else list(orders),
        hop,
        float(spread),
        int(seed),
        float(lr),
        float(betas[0]),
        float(betas[1]),
        float(eps),
        float(weight_decay),
        optimizer,
        ["" if d is None else str(d) for d in (exp_avg_dtype, exp_avg_sq_dtype, master_weight_dtype, te_build)],
        bool(fp32_master),
        optimizer_grad,
        include,
    )
    try:
        import pandas as pd
    except ImportError:
        return out
    out["rows"] = pd.DataFrame(out["rows"])
    return out

"""fp8kit.torch.Monitor under torch DDP on 2 GPUs against the single-process prediction.

Each of 2 ranks (NCCL, one GPU each) trains the same MLP under DistributedDataParallel on its own
shard of seeded data (the shards differ in scale, so the ranks' amaxes differ), with a monitor of
every nn.Linear under te-current and reduce_amax=True (each amax reduced with MAX over the ranks,
as TransformerEngine's reduce_amax). The prediction is computed in one process on one GPU: the same
model and shards, each step's two shards run one after the other, each amax the larger of the
two shards' (weights: the same on both), and the update with DDP's gradient, (g0 / 2) + (g1 / 2)
(the default allreduce comm hook divides by the world size, then sums: one rounding, the same on
both ranks). Every (step, tensor, amax) of both ranks' traces must equal the prediction bit for bit.
A control run with reduce_amax=False must differ from it (each rank's own amaxes): otherwise the
shards would not tell a reduced trace from an unreduced one, and the check could not fail.

    python scripts/gpu/ddp_monitor_check.py OUT.json [--steps 20]

Exits 1 with the first differences when a trace differs from the prediction, 2 without 2 GPUs.
"""

import argparse
import json
import os
import sys
import tempfile

import fp8kit.torch as ft
import torch


def build():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)
    )


def shard(rank, step, device):
    """Rank `rank`'s batch at `step`: seeded on the host, so both runs see the same numbers."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(32, 256, generator=g) * (1.0 + 3.0 * rank)
    y = torch.randn(32, 64, generator=g)
    return x.to(device), y.to(device)


def ddp_rank(rank, store, out_dir, steps, result, reduce_amax=True):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("nccl", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        torch.cuda.set_device(rank)
        dev = torch.device("cuda", rank)
        model = build().to(dev)
        ddp = DistributedDataParallel(model, device_ids=[rank])
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
        mon = ft.Monitor(model, recipes=["te-current"], reduce_amax=reduce_amax, out_dir=out_dir)
        for s in range(steps):
            x, y = shard(rank, s, dev)
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            mon.step()
        mon.close()
        with open(os.path.join(result, f"{rank}.json"), "w") as f:
            json.dump([[int(s), n, float(a)] for s, n, a in mon.trace], f)
    finally:
        dist.destroy_process_group()


def predict(steps):
    """{(step, tensor): amax} from one process: the larger of the two shards' amaxes."""
    dev = torch.device("cuda", 0)
    model = build().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    mon = ft.Monitor(model, recipes=["te-current"])
    for s in range(steps):
        grads = []
        for rank in (0, 1):
            x, y = shard(rank, s, dev)
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(model(x), y).backward()
            grads.append([p.grad.clone() for p in model.parameters()])
        for p, g0, g1 in zip(model.parameters(), *grads):
            p.grad = g0 / 2 + g1 / 2
        opt.step()
        mon.step()
    mon.close()
    best = {}
    for s, name, a in mon.trace:
        key = (int(s), name)
        best[key] = max(best.get(key, float("-inf")), float(a))
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the JSON summary to write")
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    if torch.cuda.device_count() < 2:
        print(f"ddp_monitor_check: needs 2 GPUs, torch sees {torch.cuda.device_count()}", file=sys.stderr)
        return 2
    import torch.multiprocessing as mp

    def run(reduce_amax):
        with tempfile.TemporaryDirectory() as tmp:
            res = os.path.join(tmp, "res")
            os.mkdir(res)
            args = (os.path.join(tmp, "store"), os.path.join(tmp, "out"), a.steps, res, reduce_amax)
            mp.spawn(ddp_rank, args=args, nprocs=2)
            return [json.load(open(os.path.join(res, f"{r}.json"))) for r in (0, 1)]

    traces, control = run(True), run(False)
    want = predict(a.steps)
    summary = dict(gpus=[torch.cuda.get_device_name(i) for i in range(2)], torch=torch.__version__, steps=a.steps)
    bad = []
    for rank, trace in enumerate(traces):
        got = {(s, n): v for s, n, v in trace}
        summary[f"rank{rank}_entries"] = len(trace)
        if set(got) != set(want):
            bad.append(dict(rank=rank, missing=len(set(want) - set(got)), extra=len(set(got) - set(want))))
        bad += [
            dict(rank=rank, step=k[0], tensor=k[1], ddp=got[k], predicted=want[k]) for k in got if got[k] != want.get(k)
        ]
    summary["predicted_entries"] = len(want)
    summary["control_differences"] = sum(1 for t in control for s, n, v in t if v != want.get((s, n)))
    summary["differences"] = len(bad)
    summary["first_differences"] = bad[:10]
    with open(a.out, "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary))
    return 1 if bad or summary["control_differences"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())

"""Per-sample cost of each conv torso on this CPU: one PPO-style training step (forward,
backward, fused Adam) on a minibatch, and acting on a batch of 16 with one thread.

    .venv/bin/python scripts/torso_costs.py [--batch 512] [--repeats 7]
    ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 .venv/bin/python scripts/torso_costs.py
    .venv/bin/python scripts/torso_costs.py --layouts both --rounds 3 --cases nature:64

The second line keeps torch's kernels to AVX2 (the non-AVX-512 case). The third compares the
channels-last layout (what ``channels_last=True`` runs) with the contiguous one, alternating
them ``--rounds`` times so that a drift of the machine's speed hits both; the ratio is
contiguous / channels-last time. Medians of --repeats; run it alone on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from rapidrl.hardware import describe
from rapidrl.nets.torso import make_torso, use_channels_last, use_precision

CASES = [("nature", 84), ("nature", 64), ("small", 42)]


def measure(
    kind: str,
    size: int,
    batch: int,
    repeats: int,
    bf16: bool,
    channels_last: bool = True,
    layer_norm: bool = False,
) -> tuple[float, float]:
    torch.manual_seed(0)
    torso = make_torso((4, size, size), kind=kind, layer_norm=layer_norm)
    if channels_last:
        use_channels_last(torso)
    use_precision(torso, torch.bfloat16 if bf16 else None)
    head = nn.Linear(torso.out_dim, 7)
    opt = torch.optim.Adam([*torso.parameters(), *head.parameters()], fused=True)
    obs = torch.randint(0, 256, (batch, 4, size, size), dtype=torch.uint8)
    if channels_last:
        obs = obs.contiguous(memory_format=torch.channels_last)
    x = torso.prepare(obs)

    def train_step() -> None:
        loss = head(torso(x)).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    times = []
    for i in range(repeats + 2):
        t = time.perf_counter()
        train_step()
        if i >= 2:
            times.append(time.perf_counter() - t)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    act = []
    with torch.no_grad():
        for i in range(25):
            t = time.perf_counter()
            torso(obs[:16])
            if i >= 5:
                act.append(time.perf_counter() - t)
    torch.set_num_threads(threads)
    return statistics.median(times) / batch * 1e6, statistics.median(act) * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--bf16", action="store_true", help="also the bf16 autocast torso")
    p.add_argument(
        "--layouts",
        choices=("channels_last", "contiguous", "both"),
        default="channels_last",
        help="the conv layout(s) to measure (both: alternated, with their ratio)",
    )
    p.add_argument("--rounds", type=int, default=1, help="alternations of the layouts")
    p.add_argument(
        "--layer-norm", action="store_true", help="a LayerNorm after every layer (PQN's torso)"
    )
    p.add_argument(
        "--cases",
        default=",".join(f"{k}:{s}" for k, s in CASES),
        help="torso:size pairs, e.g. nature:84,nature:64,small:42",
    )
    a = p.parse_args()
    cases = [(k, int(s)) for k, s in (c.split(":") for c in a.cases.split(","))]
    layouts = {"both": (True, False), "channels_last": (True,), "contiguous": (False,)}[a.layouts]
    print(
        f"{describe()}; torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"batch {a.batch}{', LayerNorm after every layer' if a.layer_norm else ''}"
    )
    print("torso   frames  precision  layout         train us/sample  act b16 1 thread ms")
    for bf16 in (False, True) if a.bf16 else (False,):
        for kind, size in cases:
            prec = "bf16" if bf16 else "fp32"
            got: dict[bool, list[tuple[float, float]]] = {cl: [] for cl in layouts}
            for _ in range(a.rounds):
                for cl in layouts:
                    got[cl].append(measure(kind, size, a.batch, a.repeats, bf16, cl, a.layer_norm))
            med = {
                cl: (statistics.median(u for u, _ in v), statistics.median(m for _, m in v))
                for cl, v in got.items()
            }
            for cl, (us, ms) in med.items():
                name = "channels-last" if cl else "contiguous"
                print(
                    f"{kind:7s} {size:2d}x{size:<3d} {prec:9s}  {name:13s}  {us:15.1f}  {ms:19.2f}"
                )
            if len(med) == 2:
                (us_cl, ms_cl), (us_c, ms_c) = med[True], med[False]
                print(f"{'':36s}contiguous/cl  {us_c / us_cl:15.2f}x {ms_c / ms_cl:18.2f}x")


if __name__ == "__main__":
    main()

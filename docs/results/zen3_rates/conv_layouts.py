"""PQN fast's three convolutions alone (64x64 frames, batch 128, 2 threads): forward + backward
(weight and bias gradients; input gradient for conv2 and conv3, as in the network),
contiguous against channels-last, alternated --rounds times; medians of 15 calls."""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--rounds", type=int, default=3)
args = p.parse_args()
torch.set_num_threads(2)
torch.manual_seed(0)
B = 128
# (input [B, C, H, W], weight [O, C, k, k], stride, input needs a gradient)
LAYERS = {
    "conv1 4->32 8x8/4 on 64x64": ((B, 4, 64, 64), (32, 4, 8, 8), 4, False),
    "conv2 32->64 4x4/2 on 15x15": ((B, 32, 15, 15), (64, 32, 4, 4), 2, True),
    "conv3 64->64 3x3/1 on 6x6": ((B, 64, 6, 6), (64, 64, 3, 3), 1, True),
}


def timed(x, w, b, stride, grad_out) -> float:
    def call():
        F.conv2d(x, w, b, stride=stride).backward(grad_out)

    for _ in range(3):
        call()
    ts = []
    for _ in range(15):
        t = time.perf_counter()
        call()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


for rnd in range(args.rounds):
    for name, (xs, ws, stride, input_grad) in LAYERS.items():
        out = []
        for fmt in (torch.contiguous_format, torch.channels_last):
            x = torch.rand(xs).contiguous(memory_format=fmt).requires_grad_(input_grad)
            w = (torch.randn(ws) * 0.1).contiguous(memory_format=fmt).requires_grad_(True)
            b = torch.zeros(ws[0], requires_grad=True)
            y = F.conv2d(x.detach(), w.detach(), b.detach(), stride=stride)
            out.append(timed(x, w, b, stride, torch.randn_like(y)))
        print(
            f"round {rnd} {name}: contiguous {out[0]:.2f} ms, channels-last {out[1]:.2f} ms "
            f"({out[0] / out[1]:.2f}x)",
            flush=True,
        )

"""Round 1's first layer (not kept): nn.Conv2d(k, stride=s) computed as a k/s x k/s stride-1
convolution over the input's space-to-depth rearrangement, weight rearranged to match; it was
rapidrl.nets.torso.SpaceToDepthConv2d in the uncommitted tree the round measured."""
import torch
import torch.nn.functional as F
from torch import nn


class SpaceToDepthConv2d(nn.Conv2d):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super().__init__(in_channels, out_channels, kernel_size, stride=stride)

    def forward(self, x):
        s, k = self.stride[0], self.kernel_size[0]
        kk = k // s
        n, c, h, w = x.shape
        hb, wb = (h - k) // s + kk, (w - k) // s + kk
        xb = x.permute(0, 2, 3, 1)[:, : hb * s, : wb * s]
        xb = xb.reshape(n, hb, s, wb, s, c).permute(0, 1, 3, 5, 2, 4)
        xb = xb.reshape(n, hb, wb, c * s * s).permute(0, 3, 1, 2)
        if not x.is_contiguous(memory_format=torch.channels_last):
            xb = xb.contiguous()
        o = self.out_channels
        wgt = self.weight.reshape(o, c, kk, s, kk, s).permute(0, 1, 3, 5, 2, 4)
        wgt = wgt.reshape(o, c * s * s, kk, kk)
        if self.weight.is_contiguous(memory_format=torch.channels_last):
            wgt = wgt.contiguous(memory_format=torch.channels_last)
        return F.conv2d(xb, wgt, self.bias)

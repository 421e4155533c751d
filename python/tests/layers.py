"""Model layers the tests share."""
import torch

import ascan


class HGRNLayer(torch.nn.Module):
    """A small HGRN-style token mixer: gates and inputs from one fused projection of a
    (B, T, D) input, a channel-last scan, a gated output projection."""

    def __init__(self, dim):
        super().__init__()
        self.proj = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, x, h0=None):
        f, i, o = self.proj(x).chunk(3, dim=-1)
        gates = torch.sigmoid(f)
        tokens = (1 - gates) * torch.nn.functional.silu(i)
        h, last = ascan.scan(gates, tokens, initial_state=h0, layout="btc",
                             return_final_state=True)
        return self.out(h * torch.sigmoid(o)), last

"""Seeding: a draw on the GPU leaves the CPU's random numbers alone."""
import torch

torch.manual_seed(0)
a = torch.randn(3)
torch.manual_seed(0)
_ = torch.randn(3, device="cuda")
b = torch.randn(3)
print(torch.equal(a, b))
torch.cuda.manual_seed_all(123)
g1 = torch.randn(4, device="cuda")
torch.cuda.manual_seed(123)
g2 = torch.randn(4, device="cuda")
print(torch.equal(g1, g2), g1.device)
print(torch.cuda.initial_seed())
state = torch.cuda.get_rng_state()
print(state.device, state.dtype)

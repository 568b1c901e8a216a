"""bfloat16 autocast: matmuls in bfloat16, softmax in float32."""
import torch

layer = torch.nn.Linear(8, 8).cuda()
x = torch.randn(4, 8, device="cuda")
with torch.autocast("cuda", dtype=torch.bfloat16):
    out = layer(x)
    sm = out.softmax(-1)
    mm = x @ x.T
print(out.dtype, sm.dtype, mm.dtype)
print(torch.cuda.is_bf16_supported())
print(torch.get_autocast_dtype("cuda"))

"""A side stream, the default stream, and waiting between them."""
import torch

s = torch.cuda.Stream()
default = torch.cuda.current_stream()
print(s == default, default == torch.cuda.default_stream())
x = torch.randn(100, device="cuda")
with torch.cuda.stream(s):
    print(torch.cuda.current_stream() == s)
    y = x * 2
default.wait_stream(s)
print(torch.cuda.current_stream() == default, y.device)
s.synchronize()
print(s.query())
e = s.record_event()
e.synchronize()
print(e.query())
print(s.device, default.cuda_stream == 0)

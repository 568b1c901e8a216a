"""The cuDNN and TF32 switches a training script sets at the top."""
import torch

print(torch.backends.cuda.is_built(), torch.backends.mps.is_built(), torch.version.cuda is not None)
print(torch.backends.cudnn.is_available(), isinstance(torch.backends.cudnn.version(), int))
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.deterministic = False
print(torch.backends.cudnn.benchmark, torch.backends.cudnn.enabled)
conv = torch.nn.Conv2d(3, 8, 3).cuda()
print(conv(torch.randn(2, 3, 16, 16, device="cuda")).shape)

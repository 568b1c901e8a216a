import torch
from torch.backends.mps import is_available as mps_available
from torch.cuda import is_available as cuda_available


def pick_device():
    for name, available in (("cuda", cuda_available), ("mps", mps_available)):
        if available():
            return torch.device(name)
    return torch.device("cpu")

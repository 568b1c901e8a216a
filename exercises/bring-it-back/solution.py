import numpy as np
import torch


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Return t's values as a NumPy array, wherever t lives and whether or not it requires grad."""
    # detach: leave the autograd graph; cpu: copy to host memory (a no-op for a host tensor); numpy: share it
    return t.detach().cpu().numpy()


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    w = torch.ones(2, 3, device=device, requires_grad=True)
    print(to_numpy(w * 2))

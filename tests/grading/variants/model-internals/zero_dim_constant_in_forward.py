import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class SequenceScorer(nn.Module):
    """Gives one score to each sequence in a batch of shape [batch, length, 8]."""

    def __init__(self, features=8, max_length=16):
        super().__init__()
        self.position = nn.Embedding(max_length, features)
        self.score = nn.Linear(features, 1)
        # buffers: moved by model.to(device) and saved by state_dict(), never trained
        self.register_buffer("mean", torch.linspace(-1.0, 1.0, features))
        self.register_buffer("std", torch.linspace(0.5, 2.0, features))

    def forward(self, x):
        x = (x - self.mean) / self.std
        positions = torch.arange(x.shape[1], device=x.device)  # made where the input is
        x = x + self.position(positions)
        half = torch.tensor(0.5)  # a 0-dim tensor on the host may meet tensors on any device
        return self.score(x).mean(dim=1) * half


torch.manual_seed(0)
model = SequenceScorer().to(device)
batch = torch.randn(4, 10, 8, device=device)
scores = model(batch)
print("scores:", scores.squeeze(1).tolist())

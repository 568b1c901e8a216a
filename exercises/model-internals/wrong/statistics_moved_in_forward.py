# expect: buffer_registered
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class SequenceScorer(nn.Module):
    """Gives one score to each sequence in a batch of shape [batch, length, 8]."""

    def __init__(self, features=8, max_length=16):
        super().__init__()
        self.position = nn.Embedding(max_length, features)
        self.score = nn.Linear(features, 1)
        # statistics of the training data, used to standardise every input
        self.mean = torch.linspace(-1.0, 1.0, features)
        self.std = torch.linspace(0.5, 2.0, features)

    def forward(self, x):
        x = (x - self.mean.to(x.device)) / self.std.to(x.device)  # copied on every call
        positions = torch.arange(x.shape[1], device=x.device)
        x = x + self.position(positions)
        return self.score(x).mean(dim=1)


torch.manual_seed(0)
model = SequenceScorer().to(device)
batch = torch.randn(4, 10, 8, device=device)
scores = model(batch)
print("scores:", scores.squeeze(1).tolist())

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class SequenceScorer(nn.Module):
    """Gives one score to each sequence in a batch of shape [batch, length, 8]."""

    def __init__(self, features=8, max_length=16):
        super().__init__()
        self.position = nn.Embedding(max_length, features)
        self.score = nn.Linear(features, 1)
        self.register_buffer("mean", torch.linspace(-1.0, 1.0, features))
        self.register_buffer("std", torch.linspace(0.5, 2.0, features))
        # every position the model can see, made once; not saved, because it is easy to rebuild
        self.register_buffer("positions", torch.arange(max_length), persistent=False)

    def forward(self, x):
        x = (x - self.mean) / self.std
        return self.score(x + self.position(self.positions[: x.shape[1]])).mean(dim=1)


torch.manual_seed(0)
model = SequenceScorer().to(device)
batch = torch.randn(4, 10, 8, device=device)
print("scores:", model(batch).squeeze(1).tolist())

import torch
from torch import nn


class SequenceScorer(nn.Module):
    def __init__(self, features: int = 8, max_length: int = 16) -> None:
        super().__init__()
        self.position = nn.Embedding(max_length, features)
        self.score = nn.Linear(features, 1)
        self.mean = nn.Buffer(torch.linspace(-1.0, 1.0, features))  # nn.Buffer registers it, like register_buffer
        self.std = nn.Buffer(torch.linspace(0.5, 2.0, features))

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        standard = (batch - self.mean) / self.std
        steps = torch.arange(batch.size(1), device=batch.device)
        return self.score(standard + self.position(steps)).mean(dim=1)


def main() -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    scorer = SequenceScorer().to(device)
    with torch.no_grad():
        scores = scorer(torch.randn(4, 10, 8, device=device))
    print("scores:", scores.squeeze(1).tolist())


if __name__ == "__main__":
    main()

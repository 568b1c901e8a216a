import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(1, 16)
        self.out = nn.Linear(16, 1)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")
torch.manual_seed(1)
X = torch.rand(200, 1) * 2 - 1
Y = 3 * X - 1
loader = DataLoader(TensorDataset(X, Y), batch_size=20)
model = Regressor()
model.to(device)  # modules move in place
optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
criterion = nn.MSELoss()
for epoch in range(6):
    total = 0.0
    for inputs, targets in loader:
        inputs = inputs.to(device)
        targets = targets.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(inputs)
    print(f"epoch {epoch}: mean loss {total / len(X):.4f}")

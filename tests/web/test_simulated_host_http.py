"""A tutorial-style trainer with integer ordinals, graded through the front door: the real app over TestClient,
a real SQLite file, the real sandbox, which simulates the CUDA GPU this host lacks."""

from __future__ import annotations

from tests.helpers import parse_sse

TRAINER = '''import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, train_data, optimizer, gpu_id):
        self.gpu_id = gpu_id
        self.model = model.to(gpu_id)
        self.train_data = train_data
        self.optimizer = optimizer

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(source), targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch):
        for source, targets in self.train_data:
            source, targets = source.to(self.gpu_id), targets.to(self.gpu_id)
            loss = self._run_batch(source, targets)
        print(f"[GPU{self.gpu_id}] Epoch {epoch} | Steps: {len(self.train_data)} | loss {loss:.4f}")

    def train(self, max_epochs):
        for epoch in range(max_epochs):
            self._run_epoch(epoch)


torch.manual_seed(0)
X = torch.linspace(-1, 1, 128).unsqueeze(1)
Y = 3 * X - 1
train_data = DataLoader(TensorDataset(X, Y), batch_size=32, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(1, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
device = DEVICE
trainer = Trainer(model, train_data, torch.optim.SGD(model.parameters(), lr=0.1), device)
trainer.train(5)
'''


def grade_over_http(learner, code: str) -> dict:
    """Submit to training-loop and read the event stream to its verdict."""
    response = learner.post("/api/exercises/training-loop/submissions", json={"code": code})
    assert response.status_code == 202, response.text
    events = parse_sse(learner.get(f"/api/submissions/{response.json()['id']}/events").text)
    assert events[-1][0] == "verdict", events
    return events[-1][1]


def test_trainer_with_integer_ordinal_passes_on_the_simulated_gpu(learner):
    code = TRAINER.replace("DEVICE", '0 if torch.cuda.is_available() else "cpu"  # an ordinal, as tutorials write it')
    verdict = grade_over_http(learner, code)
    assert verdict["status"] == "passed", [c for c in verdict["checks"] if not c["passed"]]
    assert verdict["device"] == "cuda:0 (simulated on CPU)"
    assert "[GPU0] Epoch 4 | Steps: 4 | loss" in verdict["stdout"]
    assert "Cannot access accelerator device" not in verdict["stderr"]


def test_trainer_with_a_hard_coded_ordinal_fails_only_picks_device(learner):
    verdict = grade_over_http(learner, TRAINER.replace("DEVICE", "0  # shorthand for cuda:0"))
    failed = {c["id"]: c for c in verdict["checks"] if not c["passed"]}
    assert verdict["status"] == "failed" and set(failed) == {"picks_device"}
    assert failed["picks_device"]["line"] == 9  # self.model = model.to(gpu_id)
    assert "before the program asked torch whether a GPU is usable" in failed["picks_device"]["message"]

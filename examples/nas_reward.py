"""Utilization as a reward term in your own search loop: a tiny REINFORCE over NATS-Bench cells.

    python examples/nas_reward.py            # CPU: about ten seconds on 2 cores

The "accuracy" here is the packaged NATS-Bench table's (no training); the utilization is
measured: each sampled cell is built small (C=8, N=1) and profiled once by
torchutil.nas.reward, which returns accuracy + weight x utilization as a tensor.
"""
import torch

from torchutil.nas import natsbench as nb, reward

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
table = nb.load_accuracy_table()
x = torch.randn(nb.input_shape("cifar10", batch_size=8), device=device)

logits = torch.zeros(len(nb.EDGES), len(nb.OPS), requires_grad=True)  # one categorical per edge
opt = torch.optim.Adam([logits], lr=0.05)
baseline = None
for step in range(8):
    ops = torch.distributions.Categorical(logits=logits).sample()
    arch = nb.Arch(tuple(nb.OPS[i] for i in ops.tolist()))
    with torch.device(device):
        model = nb.network(arch, "cifar10", C=8, N=1).eval()
    accuracy = table[nb.index_of_arch(arch)].cifar10_test_acc / 100
    r = reward(model, x, accuracy=accuracy, weight=1.0)   # 0-dim float64 tensor
    baseline = r if baseline is None else 0.9 * baseline + 0.1 * r
    log_p = torch.distributions.Categorical(logits=logits).log_prob(ops).sum()
    loss = -log_p * (r - baseline).float()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step}: accuracy {100 * accuracy:6.2f} %  reward {r.item():.4f}  {arch}")
print("most likely cell:", nb.Arch(tuple(nb.OPS[i] for i in logits.argmax(1).tolist())))

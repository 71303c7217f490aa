"""Ray Tune over NATS-Bench cells with torchutil's reward: four trials at a time on each GPU
(fractional GPUs), every one measured in that GPU's one service (torchutil.nas.service), so
they get the figures of one process.

    python examples/ray_tune_nas.py                      # a local Ray; or RAY_ADDRESS=auto

The trials report accuracy (the packaged NATS-Bench table) and utilization; Tune's search
follows the first (pass a search algorithm, e.g. OptunaSearch, for more).
"""
import ray
import torch
from ray import tune

from torchutil.nas import engines

trainable = engines.tune_trainable(["accuracy", "utilization"])
resources = {"cpu": 1, "gpu": 0.25} if torch.cuda.is_available() else {"cpu": 1}
ray.init(include_dashboard=False)
tuner = tune.Tuner(tune.with_resources(trainable, resources), param_space=engines.tune_space(),
                   tune_config=tune.TuneConfig(num_samples=16, metric="accuracy", mode="max"))
results = tuner.fit()
for r in sorted(results, key=lambda r: -r.metrics["accuracy"])[:5]:
    print(f"accuracy {r.metrics['accuracy']:6.2f} %  utilization {r.metrics['utilization']:.4f}  "
          f"cell {r.metrics['index']:5d}  measured by pid {r.metrics['measured_by']}")

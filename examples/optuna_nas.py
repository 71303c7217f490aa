"""Multi-objective NAS in Optuna with torchutil's reward: accuracy (the packaged NATS-Bench table)
against measured utilization, the Pareto front plotted.

    python examples/optuna_nas.py                                  # one process, n_jobs threads
    python examples/optuna_nas.py --storage sqlite:///nas.db &     # any number of processes
    python examples/optuna_nas.py --storage sqlite:///nas.db       # ... sharing one study

Every process's cells are measured in the GPU's one service (torchutil.nas.service), so N
processes and their threads get the figures of one process. On a machine without a GPU it
measures on the CPU at batch 8 (slow: ~seconds a cell); --metric inputs_per_second (or
inputs_per_joule, where rows have it) for another objective. The plot needs matplotlib: without
it the example says so and skips it.
"""
import argparse

import optuna

from torchutil.nas import engines

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--storage", default=None, help="an Optuna storage URL shared by processes (default: in memory)")
p.add_argument("--trials", type=int, default=20)
p.add_argument("--jobs", type=int, default=2, help="Optuna's n_jobs: threads of this process")
p.add_argument("--metric", default="utilization")
p.add_argument("--plot", default="pareto.png")
args = p.parse_args()

objective = engines.optuna_objective(["accuracy", args.metric])
study = optuna.create_study(study_name="nas-utilization", storage=args.storage, load_if_exists=True,
                            directions=objective.directions, sampler=optuna.samplers.NSGAIISampler(seed=0))
study.optimize(objective, n_trials=args.trials, n_jobs=args.jobs)
objective.reward.close()
for t in study.best_trials:
    print(f"accuracy {t.values[0]:6.2f} %  {args.metric} {t.values[1]:.4g}  cell {t.user_attrs['index']:5d} "
          f"{t.user_attrs['arch']}")
try:
    print("Pareto front:", engines.plot_pareto_front(study, args.plot, ["accuracy (%)", args.metric]))
except ModuleNotFoundError:  # matplotlib, the plot's one optional need; the study is whole without it
    print("no Pareto plot: matplotlib is not installed (pip install matplotlib)")

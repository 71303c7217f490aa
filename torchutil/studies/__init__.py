"""The studies torchutil's command line runs, apart from the library they use.

    python -m torchutil survey ...        survey/: utilization of many classifiers (RQ1)
    python -m torchutil fold-bench ...    foldbench.py: original versus FoldedCNN (RQ2)
    python -m torchutil nas evaluate ...  nas_evaluate.py: the NATS-Bench sweep into SQLite
    python -m torchutil nas correlate ... nas_correlate.py: utilization versus accuracy (RQ3)
    python -m torchutil nas search ...    nas_search.py: simulated REINFORCE with utilization (RQ4/5)
    python -m torchutil coded ...         coded.py: learned codes and parity models (torchutil.coded)

cli/ wires them (and the `profile` command) to `python -m torchutil`, one module per command; _common.py holds what
they share. The library (torchutil.profile, roofline, fold, models, torchutil.nas,
torchutil.coded) never imports from here.
"""

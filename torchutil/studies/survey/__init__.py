"""The CNN utilization survey (RQ1): profiles classification models over batch sizes, dtypes
and timing modes, and writes what it measured as CSV, JSON, PNG plots and one HTML report.

    python -m torchutil survey --models resnet50 mobilenet_v3_large --batches 1 32 256 --out survey/

Resumable: every finished (model, batch, dtype, mode) is appended to OUT/survey.jsonl at once,
and a rerun skips what is there (failures included: they are recorded with their error;
retry_failed / --retry-failed runs them again, and the newer row of a configuration wins).
Plots need matplotlib (pip install matplotlib: the plot extra); the progress bar uses tqdm when present.

run.py: what a survey runs and measuring it; store.py: survey.jsonl and the CSV and JSON
written from it; plots.py: the PNG plots; report.py: the HTML report and write_outputs.
"""
from torchutil.studies.survey.plots import CAPTIONS, LABELLED, PLOTS, format_number, roofline_plot_name
from torchutil.studies.survey.report import write_outputs
from torchutil.studies.survey.run import DTYPES, MODES, SurveyConfig, default_models, imagenet_top1, run_survey
from torchutil.studies.survey.store import OP_KEYS, RESULTS, load_results, ops_by_name

__all__ = ["CAPTIONS", "DTYPES", "LABELLED", "MODES", "OP_KEYS", "PLOTS", "RESULTS", "SurveyConfig",
           "default_models", "format_number", "imagenet_top1", "load_results", "ops_by_name",
           "roofline_plot_name", "run_survey", "write_outputs"]

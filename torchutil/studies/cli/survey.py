"""torchutil survey: utilization of many CNNs over batch sizes, dtypes and timing modes
(torchutil/studies/survey)."""
from __future__ import annotations

import argparse
import os
import sys

from torchutil.models import dtype_name
from torchutil.studies._common import fail, plots_available
from torchutil.studies.cli.args import (ALIASES_HELP, add_counters_argument, add_energy_arguments, add_peak_argument,
                                        add_repeat_arguments, known_device, output_dir, pick_device, positive)


def add_parser(sub: argparse._SubParsersAction) -> None:
    from torchutil.studies.survey import DTYPES as SURVEY_DTYPES, MODES as SURVEY_MODES

    s = sub.add_parser("survey", help="utilization of many CNNs over batch sizes, dtypes, modes")
    s.add_argument("--models", nargs="+", default=None,
                   help="names as torchutil profile takes them: torchvision classifiers, CNNs of torchutil.models "
                        "(spec_4conv_64, ...), timm:<name> (default: every torchvision classification model; "
                        "where torchvision is not installed, the CNNs that need torch alone)")
    s.add_argument("--batches", nargs="+", type=positive, default=None,
                   help="batch sizes (default 1 8 32 128 256 on CUDA, 1 8 on CPU)")
    s.add_argument("--dtypes", nargs="+", type=dtype_name, choices=SURVEY_DTYPES, default=None,
                   help=f"default all four on CUDA, float32 on CPU (tf32 runs on CUDA only; {ALIASES_HELP})")
    s.add_argument("--modes", nargs="+", choices=SURVEY_MODES, default=None,
                   help="default both on CUDA, eager on CPU (cuda_graph runs on CUDA only)")
    s.add_argument("--device", type=known_device, default="auto", help="auto (CUDA if present), cpu, cuda, cuda:1, ...")
    s.add_argument("--out", type=output_dir, default="survey", help="output folder (default ./survey); a rerun resumes")
    s.add_argument("--image-size", type=positive, default=None, help="default 224 (299 for inception_v3)")
    s.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None,
                   help="channels_last memory format (default on for CUDA)")
    add_repeat_arguments(s)
    add_peak_argument(s)
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--report-only", action="store_true",
                   help="measure nothing: write the CSV, JSON, plots and report from OUT/survey.jsonl")
    s.add_argument("--retry-failed", action="store_true",
                   help="run again the configurations that failed in an earlier run of OUT")
    add_counters_argument(s)
    add_energy_arguments(s)
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from torchutil.models import check_name, has_torchvision
    from torchutil.studies import survey

    for name in args.models or ():
        check_name(name)  # a typo's near names before anything runs
    if not args.models and not args.report_only and not has_torchvision():
        print("survey: torchvision is not installed, so the models are the CNNs of torchutil.models that need "
              "torch alone", file=sys.stderr)
    device = pick_device(args.device)
    on_cuda = device.type == "cuda"
    config = survey.SurveyConfig(
        models=args.models or survey.default_models(),
        batches=args.batches or ([1, 8, 32, 128, 256] if on_cuda else [1, 8]),
        dtypes=args.dtypes or (list(survey.DTYPES) if on_cuda else ["float32"]),
        modes=args.modes or (list(survey.MODES) if on_cuda else ["eager"]),
        device=str(device), out=args.out, image_size=args.image_size,
        channels_last=args.channels_last, warmup=args.warmup, iters=args.iters, peak=args.peak,
        progress=not args.no_progress, retry_failed=args.retry_failed, counters=args.counters,
        energy=args.energy, energy_window=args.energy_window,
        energy_windows=args.energy_windows)
    if args.report_only:
        rows = survey.load_results(args.out)
        path = os.path.join(args.out, survey.RESULTS)
        if not rows:
            raise fail(f"--report-only: no results in {path}" if os.path.exists(path) or os.path.exists(path + ".gz")
                       else f"--report-only: no {survey.RESULTS} in {args.out}; run `survey --out {args.out}` first "
                            f"(the report is made from its rows)")
    else:
        rows = survey.run_survey(config)
    written = survey.write_outputs(rows, config, plots=plots_available())
    failed = [r for r in rows if r.get("status") == "error"]
    print(f"survey: {len(rows)} configurations in {args.out} ({len(failed)} failed); wrote "
          + ", ".join(written))
    if failed:
        for r in failed:
            print(f"failed: {r['model']} batch {r['batch']} {r['dtype']} {r['mode']}: {r.get('error', '')}",
                  file=sys.stderr)
        print(f"survey: {len(failed)} configuration(s) failed; after a fix, rerun with --retry-failed",
              file=sys.stderr)
        return 1
    return 0

"""python -m torchutil survey on the CPU: two small models end to end, every output file, the
resume, the HTML report (parsed; in a headless browser where TORCHUTIL_BROWSER_TESTS=1, as
`make test-browser` sets it), and the tf32 flags."""
from __future__ import annotations

import csv
import dataclasses
import html
import json
import os
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser

import pytest
import torch

import torchutil
from torchutil.studies import survey
from torchutil.studies._common import tf32_flags
from torchutil.studies.cli import main

pytest.importorskip("matplotlib", reason="the survey's plots need matplotlib (pip install matplotlib: the plot extra)")

MODELS = ["squeezenet1_1", "mobilenet_v3_small"]
ARGS = ["survey", "--device", "cpu", "--models", *MODELS, "--batches", "1", "2", "--dtypes", "float32",
        "--modes", "eager", "--image-size", "64", "--warmup", "1", "--iters", "2",
        "--no-progress"]
OUTPUTS = ["survey.jsonl", "survey.csv", "survey.json", "report.html", *survey.PLOTS,
           *[survey.roofline_plot_name(m) for m in MODELS]]


@pytest.fixture(scope="module")
def survey_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("survey")
    t0 = time.perf_counter()
    assert main([*ARGS, "--out", str(out)]) == 0
    elapsed = time.perf_counter() - t0
    assert elapsed < 120, f"the CPU survey of two small models took {elapsed:.0f} s"
    return out


def test_writes_every_output(survey_dir):
    for name in OUTPUTS:
        path = survey_dir / name
        assert path.exists() and path.stat().st_size > 0, name
    for name in [*survey.PLOTS, *[survey.roofline_plot_name(m) for m in MODELS]]:
        assert (survey_dir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    rows = json.loads((survey_dir / "survey.json").read_text())
    # 2 models x 2 batches x float32 x eager (cuda_graph is refused on a CPU: tests/test_faults.py).
    assert sorted(survey.store.key(r) for r in rows) == sorted(
        (m, b, "float32", "eager") for m in MODELS for b in (1, 2))
    assert all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows]
    for r in rows:
        assert 0 < r["summary"]["utilization"]
        assert r["top1"] == pytest.approx(survey.imagenet_top1(r["model"]))
        assert r["ops"] and sum(r["bounds"].values()) == len(r["ops"])
        assert all(list(o) == list(survey.OP_KEYS) for o in r["ops"])
    with open(survey_dir / "survey.csv") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 4 and float(table[0]["utilization"]) > 0
    report = (survey_dir / "report.html").read_text()
    for name in [*survey.PLOTS, survey.roofline_plot_name(MODELS[0])]:
        assert f'src="{name}"' in report
    assert "squeezenet1_1" in report


def test_report_header_plots_first_sortable_table(survey_dir):
    report = (survey_dir / "report.html").read_text()
    for part in ("peak FLOP/s", "memory bandwidth", "report written", f"torchutil {torchutil.__version__}",
                 f"torch {torch.__version__}", 'id="results"', 'id="filter"', "<script>", "data-v="):
        assert part in report, part
    # Plots before the table, each with its caption; no external assets.
    assert report.index("util_vs_batch.png") < report.index('id="results"')
    for caption in survey.CAPTIONS.values():
        assert html.escape(caption) in report
    assert "http://" not in report and "https://" not in report


@pytest.mark.parametrize("value, text", [
    (0.07123, "0.0712"), (3.07, "3.07"), (45.12, "45.1"), (1792.2, "1,792"), (2, "2"), (0.0, "0"),
    (None, "–"), (float("nan"), "–"),
])
def test_one_number_format(value, text):
    assert survey.format_number(value) == text


def test_labels_are_spread_apart():
    values = [5.0, 5.0, 5.1, 9.0, 4.95]
    placed = survey.plots._spread(values, gap=1.0)
    ordered = sorted(placed)
    assert all(b - a >= 1.0 - 1e-12 for a, b in zip(ordered, ordered[1:]))
    assert sorted(range(5), key=placed.__getitem__) == sorted(range(5), key=values.__getitem__)


def test_plots_leave_matplotlib_as_the_user_set_it():
    code = ("import sys, matplotlib; before = matplotlib.get_backend(); "
            "from torchutil.studies import _common; _common.figure().subplots().plot([1, 2]); "
            "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'; "
            "assert matplotlib.get_backend() == before, matplotlib.get_backend()")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120,
                   env={**os.environ, "MPLBACKEND": "svg",
                        "PYTHONPATH": os.path.dirname(os.path.dirname(torchutil.__file__))})


def test_rerun_skips_finished_work(survey_dir, capsys):
    before = (survey_dir / "survey.jsonl").read_text()
    t0 = time.perf_counter()
    assert main([*ARGS, "--out", str(survey_dir)]) == 0
    assert (survey_dir / "survey.jsonl").read_text() == before  # nothing measured again
    assert time.perf_counter() - t0 < 60
    # One more batch size: only its configurations run.
    assert main([*ARGS, "--batches", "1", "2", "3", "--models", "squeezenet1_1", "--out", str(survey_dir)]) == 0
    lines = (survey_dir / "survey.jsonl").read_text().splitlines()
    assert len(lines) == 5 and json.loads(lines[-1])["batch"] == 3


def test_report_only_measures_nothing(survey_dir, tmp_path, capsys):
    out = tmp_path / "copy"
    out.mkdir()
    shutil.copy(survey_dir / survey.RESULTS, out / survey.RESULTS)
    before = (out / survey.RESULTS).read_text()
    assert main(["survey", "--out", str(out), "--report-only", "--no-progress"]) == 0
    assert (out / survey.RESULTS).read_text() == before
    for name in ["survey.csv", "survey.json", "report.html", *survey.PLOTS]:
        assert (out / name).stat().st_size > 0, name
    with pytest.raises(SystemExit, match="no results in"):
        main(["survey", "--out", str(tmp_path / "empty"), "--report-only"])


def test_report_only_reads_gzipped_rows_and_names_what_measured_them(survey_dir, tmp_path):
    # As docs/results/survey keeps them: survey.jsonl.gz and no plain file.
    import gzip

    out = tmp_path / "published"
    out.mkdir()
    rows = (survey_dir / survey.RESULTS).read_bytes()
    (out / (survey.RESULTS + ".gz")).write_bytes(gzip.compress(rows))
    assert main(["survey", "--out", str(out), "--report-only", "--no-progress"]) == 0
    assert not (out / survey.RESULTS).exists()  # read in place, nothing unpacked beside it
    measured = json.loads((out / "survey.json").read_text())
    assert len(measured) == len([line for line in rows.splitlines() if line.strip()])
    assert {r["torch_version"] for r in measured} == {torch.__version__}
    assert f"torch {torch.__version__}, torchutil {torchutil.__version__}" in (out / "report.html").read_text()


def test_plots_with_many_models(survey_dir, tmp_path):
    """A survey of many models (as on a GPU: every torchvision model, two modes) still plots."""
    row = json.loads((survey_dir / "survey.json").read_text())[0]
    rows = []
    for i in range(3 * survey.LABELLED):
        for mode in survey.MODES:
            for batch in (1, 8):
                r = json.loads(json.dumps(row))
                r.update(model=f"net{i}", mode=mode, batch=batch)
                r["summary"]["utilization"] = 0.01 * (i + 1) * batch
                rows.append(r)
    config = survey.SurveyConfig(models=[], batches=[], dtypes=[], modes=[], out=str(tmp_path))
    written = survey.write_outputs(rows, config)
    assert set(survey.PLOTS) <= set(written)
    assert len([w for w in written if w.startswith("roofline_")]) == 3 * survey.LABELLED


def test_resume_drops_a_cut_line(tmp_path):
    good = {"model": "m", "batch": 1, "dtype": "float32", "mode": "eager", "status": "ok", "summary": {}}
    (tmp_path / survey.RESULTS).write_text(json.dumps(good) + "\n" + '{"model": "m", "bat')
    with pytest.warns(UserWarning, match="line 2: not JSON"):
        assert survey.load_results(str(tmp_path)) == [good]


def test_op_keys_are_roofline_fields():
    assert set(survey.OP_KEYS) <= {f.name for f in dataclasses.fields(torchutil.RooflineRow)}


def test_old_positional_ops_are_read_by_name(tmp_path):
    op = ["aten::convolution", "features.0", 140747200, 734848, 191.5, None, 0.93, "memory-bound"]
    old = {"model": "m", "batch": 1, "dtype": "float32", "mode": "eager", "status": "ok", "summary": {},
           "ops": [op, op]}
    new = {**old, "model": "n", "ops": [dict(zip(survey.OP_KEYS, op))]}
    (tmp_path / survey.RESULTS).write_text(json.dumps(old) + "\n" + json.dumps(new) + "\n")
    with pytest.warns(UserWarning, match="1 row.* positional list"):
        rows = survey.load_results(str(tmp_path))
    assert rows[0]["ops"] == [dict(zip(survey.OP_KEYS, op))] * 2 and rows[1] == new
    with pytest.raises(ValueError, match="neither a dict by name nor a list of 8 values"):
        survey.ops_by_name({**old, "ops": [op[:5]]})


def test_failed_configuration_is_recorded(tmp_path):
    config = survey.SurveyConfig(models=["no_such_model"], batches=[1], dtypes=["float32"],
                                 modes=["eager"], out=str(tmp_path), progress=False)
    rows = survey.run_survey(config)
    assert rows[0]["status"] == "error" and "unknown model" in rows[0]["error"]
    survey.write_outputs(rows, config)
    assert "Failed configurations" in (tmp_path / "report.html").read_text()


def test_tf32_flags_restored():
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    for dtype, expected in (("tf32", True), ("float32", False)):
        with tf32_flags(dtype):
            assert torch.backends.cuda.matmul.allow_tf32 is expected
            assert torch.backends.cudnn.allow_tf32 is expected
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == saved
    with pytest.raises(RuntimeError):
        with tf32_flags("tf32"):
            raise RuntimeError("restored on errors too")
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == saved


class _ReportParts(HTMLParser):
    """What a browser would lay out from report.html: the images' sources, the results table's
    header and rows (each cell's text and data-v), and the scripts."""

    def __init__(self):
        super().__init__()
        self.images: list[str] = []
        self.header: list[str] = []
        self.rows: list[list[tuple[str, str | None]]] = []
        self.scripts = 0
        self._in_results = False
        self._cell: list[str] | None = None
        self._value: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.images.append(a["src"])
        elif tag == "script":
            self.scripts += 1
        elif tag == "table" and a.get("id") == "results":
            self._in_results = True
        elif self._in_results and tag == "tr" and self.header:
            self.rows.append([])
        elif self._in_results and tag in ("th", "td"):
            self._cell, self._value = [], a.get("data-v")

    def handle_endtag(self, tag):
        if tag == "table":
            self._in_results = False
        elif self._cell is not None and tag in ("th", "td"):
            text = "".join(self._cell)
            self.header.append(text) if tag == "th" else self.rows[-1].append((text, self._value))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_report_parts_are_there_and_load(survey_dir):
    """The report as a browser would load it, with no browser: every image it shows is a PNG of
    the folder that decodes to a drawn picture (not one colour), every plot is shown, and the
    results table has a row per configuration, each with a cell per column whose text is the
    report's number format of its data-v value (the oracle of the numbers: survey.json)."""
    from PIL import Image

    from torchutil.studies.survey.plots import format_number

    parts = _ReportParts()
    parts.feed((survey_dir / "report.html").read_text())
    # (Other tests of this module add configurations to the folder: the report shows what it holds.)
    rows = [r for r in json.loads((survey_dir / "survey.json").read_text()) if r["status"] == "ok"]
    plots = [*survey.PLOTS, *[survey.roofline_plot_name(m) for m in {r["model"] for r in rows}]]
    assert sorted(parts.images) == sorted(plots)
    for name in parts.images:
        with Image.open(survey_dir / name) as image:
            assert image.format == "PNG" and min(image.size) >= 200, (name, image.size)
            colors = image.convert("RGB").getcolors(maxcolors=1 << 20)
            assert colors is None or len(colors) > 50, f"{name} is (almost) a single colour"
    assert parts.scripts == 1 and parts.header[:4] == ["model", "batch", "dtype", "mode"]
    assert len(parts.rows) == len(rows) >= 4
    assert all(len(row) == len(parts.header) for row in parts.rows)
    by_key = {(r["model"], r["batch"], r["dtype"], r["mode"]): r for r in rows}
    utilization = parts.header.index("utilization %")
    for row in parts.rows:
        model, batch, dtype, mode = (text for text, _ in row[:4])
        r = by_key[(model, int(batch), dtype, mode)]
        text, value = row[utilization]
        assert float(value) == pytest.approx(100 * r["summary"]["utilization"], rel=1e-12)
        for text, value in row[4:]:
            assert text == format_number(json.loads(value) if value else None)  # data-v: repr of an int or float


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(os.environ.get("TORCHUTIL_BROWSER_TESTS") != "1",
                    reason="opt-in: TORCHUTIL_BROWSER_TESTS=1 (make test-browser installs chromium and sets it)")
def test_report_renders_in_a_headless_browser(survey_dir, tmp_path):
    from PIL import Image

    assert _chromium(), "TORCHUTIL_BROWSER_TESTS=1 but chromium is not installed (make test-browser installs it)"
    shot = tmp_path / "report.png"
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           f"--screenshot={shot}", "--window-size=1400,1800", (survey_dir / "report.html").as_uri()]
    subprocess.run(cmd, check=True, timeout=120, capture_output=True)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1400, 1800)
    colors = image.getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50, "the screenshot is (almost) a single color"
    # The plots are drawn: the screenshot holds many non-white pixels below the table.
    lower = image.crop((0, 600, 1400, 1800)).convert("L")
    dark = sum(lower.histogram()[:200])
    assert dark > 5000, f"only {dark} dark pixels where the plots should be"

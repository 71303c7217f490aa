#include "libtorch/Profile.h"

#include <c10/core/InferenceMode.h>
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>

#include "core/HwResult.h"
#include "core/Metrics.h"
#include "libtorch/CounterReading.h"
#include "libtorch/Forward.h"
#include "libtorch/KernelTracing.h"
#include "libtorch/OpCounter.h"

namespace torchutil {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

c10::Device checkInputs(const std::vector<at::Tensor>& inputs) {
  TORCH_CHECK_VALUE(!inputs.empty(), "torchutil: profile needs at least one input tensor");
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK_VALUE(inputs[i].defined(), "torchutil: input ", i, " is an undefined tensor");
    TORCH_CHECK_VALUE(inputs[i].device() == inputs[0].device(),
                      "torchutil: inputs are on different devices: input 0 on ",
                      inputs[0].device().str(), ", input ", i, " on ", inputs[i].device().str());
  }
  TORCH_CHECK_VALUE(inputs[0].dim() >= 1,
                    "torchutil: the input needs a batch dimension, got a 0-d tensor");
  return inputs[0].device();
}

// The memory bandwidth a result is measured against; none on the meta device.
Bandwidth bandwidthOf(c10::Device device) {
  if (device.is_meta()) {
    return {kNaN, "none: nothing runs on the meta device"};
  }
  return deviceBandwidth(device, RateSource::Auto);
}

}  // namespace

NamedResult nameResult(const ProfileOutput& out) {
  NamedResult r;
  r.summary = out.summary;
  const auto& rows = out.table.rows();
  for (size_t i = 0; i < rows.size(); ++i) {
    const bool traced = out.traced && i < out.trace.perRow.size();
    addOpRow(r.ops, rows[i], traced ? &out.trace.perRow[i] : nullptr, out.peak.flopsPerSecond,
             out.bandwidth.bytesPerSecond);
  }
  for (const auto& [op, calls] : out.table.unknown()) {
    const size_t row = r.unknownOps.addRow();
    r.unknownOps.setText(row, UnknownOpField::op, op);
    r.unknownOps.set(row, UnknownOpField::calls, static_cast<double>(calls));
  }
  addKernelRows(r.kernels, out.kernels, out.events);
  hw::fillOpRows(r.ops, out.hw, rows);
  hw::fillKernelRows(r.kernels, out.hw);
  r.setText(TextField::peak_source, out.peak.source);
  r.setText(TextField::peak_dtype, out.peak.dtype);
  r.setText(TextField::timing_mode, out.timingMode);
  r.setText(TextField::timing_note, out.timingNote);
  r.setText(TextField::repetition, out.repetition);
  r.setText(TextField::bandwidth_source, out.bandwidth.source);
  r.setText(TextField::device, out.device);
  r.setText(TextField::trace_status, out.traceStatus);
  r.setText(TextField::kernel_attribution, !out.traced                ? "none"
                                           : out.trace.perOpFromTimed ? "timed"
                                                                      : "counted");
  r.setText(TextField::chrome_trace, out.chromeTrace);
  r.setText(TextField::counters_status, out.countersStatus);
  r.setText(TextField::counters_not_on_gpu, out.countersNotOnGpu);
  return r;
}

ProfileOutput summarizeCount(CountTable table, c10::Device device, int64_t batchSize,
                             double seconds, RateSource peakSource,
                             std::optional<double> peakFlops) {
  ProfileOutput out;
  out.peak = peakForCount(device, table, peakSource, peakFlops);
  out.bandwidth = bandwidthOf(device);
  SummaryInputs s;
  s.totals = table.totals();
  s.secondsPerForward = seconds;
  s.secondsInterval = MedianInterval{seconds, seconds, seconds};
  s.peakFlopsPerSecond = out.peak.flopsPerSecond;
  s.peakBytesPerSecond = out.bandwidth.bytesPerSecond;
  s.batchSize = batchSize;
  s.iterations = 1;
  out.summary = summarize(s);
  out.table = std::move(table);
  out.device = device.str();
  out.timingMode = "wall";
  out.repetition = "one timed block";
  return out;
}

ProfileOutput profileModel(const c10::IValue& model, const std::vector<at::Tensor>& inputs,
                           const ProfileOptions& options) {
  try {
    checkRepeatPolicy(options.repeat);
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
  TORCH_CHECK_VALUE(options.warmup >= 0, "torchutil: warmup must be >= 0, got ", options.warmup);
  TORCH_CHECK_VALUE(options.traceForwards >= 0, "torchutil: trace_forwards must be >= 0, got ",
                    options.traceForwards);
  TORCH_CHECK(!OpCounter::active(),
              "torchutil: a profile is already counting on this thread; profiles cannot be "
              "nested (finish the outer torchutil.profile / torchutil.Profiler first)");
  const c10::Device device = checkInputs(inputs);
  std::unique_ptr<Forward> forward = makeForward(model);
  if (auto paramDevice = forward->parameterDevice()) {
    TORCH_CHECK_VALUE(*paramDevice == device, "torchutil: the input is on ", device.str(),
                      " but the model's parameters are on ", paramDevice->str(),
                      "; move one of them (model.to(x.device))");
  }
  if (options.timing == TimingMode::CudaGraph) {
    TORCH_CHECK_VALUE(device.is_cuda(), "torchutil: timing='cuda_graph' needs CUDA inputs, got ",
                      device.str());
  }
  checkPeakOverride(options.peakFlops);  // before anything runs

  c10::InferenceMode inference;
  // Warm-up first, so that lazy initialization and torch.compile's tracing stay out of the
  // count; then one counted forward; then the traced forwards; then the timed forwards, which
  // run without any hook.
  const bool onMeta = device.is_meta();
  // Traced forwards count as warm-ups: eager ones run after the counted forward instead of
  // before it (graph replays are warmed up after the capture), so tracing adds no forward
  // while warmup - 1 >= trace_forwards. A torch.compile'd forward compiles on its first call:
  // that call is never the counted one.
  const bool traces = options.trace && device.is_cuda();
  const int64_t tracedEager =
      traces && options.timing == TimingMode::Eager ? options.traceForwards : 0;
  const int64_t plainWarmups =
      std::max<int64_t>(options.warmup - 1 - tracedEager, forward->compiled() ? 1 : 0);
  // Graph timing: these forwards run on the stream the capture will use, as its warm-up.
  const std::optional<c10::Stream> side = captureStream(device, options.timing);
  std::optional<c10::StreamGuard> onSide;
  if (side.has_value()) {
    onSide.emplace(*side);
  }
  // The timeline's interval is chosen from how long the sampled forwards will take: one forward
  // is timed for that, the last warm-up (else the counted forward, slower for its counting).
  const bool estimate = hw::hasSet(options.counters, hw::CounterSet::Timeline) && device.is_cuda();
  double forwardSeconds = 0;
  const auto timeOne = [&](const std::function<void()>& run) {
    synchronizeDevice(device);
    const auto t0 = std::chrono::steady_clock::now();
    run();
    synchronizeDevice(device);
    forwardSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int64_t i = 0; i < plainWarmups; ++i) {
    if (estimate && i == plainWarmups - 1) {
      timeOne([&] { forward->run(inputs); });
    } else {
      forward->run(inputs);
    }
    checkInterrupt();
  }
  ProfileOutput out;
  std::unique_ptr<KernelTracing> tracing;
  if (options.trace && !onMeta) {
    tracing = KernelTracing::start(device, &out.traceStatus, traceBackend(options.backends));
  } else {
    out.traceStatus = onMeta ? "off: nothing runs on the meta device" : "off: trace=False";
  }
  CountResult counted;
  {
    std::unique_ptr<Forward::ModuleScope> modules =
        options.modulePaths && !forward->compiled() ? forward->trackModules() : nullptr;
    CountingScope counting(tracing ? tracing->hooks() : nullptr);
    if (estimate && plainWarmups == 0) {
      timeOne([&] { forward->run(inputs); });
    } else {
      forward->run(inputs);
    }
    counted = counting.finish();
  }
  onSide.reset();
  CountTable& table = counted.table;
  TimingResult timing;
  std::vector<KernelRecord> countedKernels, timedKernels;
  // Hardware counters: PM sampling over the traced forwards, which have kernel records to line
  // the samples up with (over as many forwards after the timed ones when nothing is traced: the
  // sampler's buffer holds a few thousand samples, not a whole timing); the range profiler's
  // passes after the timed forwards. The timed forwards run without either.
  CounterReading counters(device, options.counters, tracing != nullptr, options.pmIntervalNs,
                          options.counterReplay, counterBackend(options.backends));
  if (!onMeta) {
    if (tracing) {
      tracing->countedDone();
    }
    TimingPlan plan;
    plan.mode = options.timing;
    plan.warmup = options.warmup;
    plan.repeat = options.repeat;
    plan.warmedStream = side;
    if (tracing) {
      plan.tracedForwards = options.traceForwards;
      // With trace_forwards=0 there is nothing traced to sample: forwards after the timed ones are.
      const bool sampleTraced = options.traceForwards > 0;
      plan.beforeTraced = [&, sampleTraced] {
        if (sampleTraced) {
          counters.startTimeline(forwardSeconds * static_cast<double>(options.traceForwards));
        }
        tracing->timedStart();
      };
      // The trace ends before the timed forwards, which then run without CUPTI.
      plan.afterTraced = [&, sampleTraced] {
        tracing->finish(&countedKernels, &timedKernels);
        if (sampleTraced) {
          counters.stopTimeline();
        }
      };
    }
    if (counters.wantsTimeline() && (!tracing || options.traceForwards == 0)) {
      plan.sampledForwards = std::max<int64_t>(options.traceForwards, 1);
      plan.beforeSampled = [&] {
        counters.startTimeline(forwardSeconds * static_cast<double>(plan.sampledForwards));
      };
      plan.afterSampled = [&] { counters.stopTimeline(); };
    }
    timing = timeForwards(*forward, inputs, device, plan);
    out.timingNote = timing.note;
    out.repetition = timing.repeat.stop;
    // Each user-replay pass is one more eager forward, waited for (kernel replay: one in all).
    counters.readRanges(
        [&] {
          forward->run(inputs);
          synchronizeDevice(device);
        },
        countedKernels.size() + 64);
  }
  if (tracing) {
    if (tracing->dropped() > 0) {
      out.traceStatus =
          "on, incomplete: CUPTI dropped " + std::to_string(tracing->dropped()) + " records";
    }
    tracing.reset();
    const int64_t traced = options.traceForwards;
    const bool byPosition = attributeByPosition(countedKernels, timedKernels, traced);
    out.trace = summarizeTrace(countedKernels, timedKernels, traced, byPosition, counted.events,
                               table.rows().size());
    out.traced = true;
    out.kernels = std::move(countedKernels);
    out.kernels.insert(out.kernels.end(), std::make_move_iterator(timedKernels.begin()),
                       std::make_move_iterator(timedKernels.end()));
    out.events = std::move(counted.events);
  }
  out.countersStatus = counters.finish(out.kernels, out.events, &out.hw);
  out.countersNotOnGpu = counters.notOnGpu();
  if (out.traced && options.chromeTrace) {
    out.chromeTrace = chromeTrace(out.events, table.rows(), out.kernels, deviceName(device),
                                  hw::counterTracks(out.hw));
  }

  out.peak = peakForCount(device, table, options.peak, options.peakFlops);
  out.bandwidth = bandwidthOf(device);
  SummaryInputs s;
  s.totals = table.totals();
  s.secondsPerForward = onMeta ? kNaN : timing.repeat.interval.median;
  s.secondsInterval = onMeta ? MedianInterval{kNaN, kNaN, kNaN} : timing.repeat.interval;
  s.peakFlopsPerSecond = out.peak.flopsPerSecond;
  s.peakBytesPerSecond = out.bandwidth.bytesPerSecond;
  s.batchSize = inputs[0].size(0);
  s.iterations = static_cast<int64_t>(timing.repeat.seconds.size());
  s.cudaGraph = timing.used == TimingMode::CudaGraph && !onMeta;
  s.trace = out.traced ? &out.trace : nullptr;
  s.tracedForwards = out.traced ? options.traceForwards : 0;
  out.summary = summarize(s);
  hw::fillSummary(out.summary, out.hw, static_cast<double>(s.totals.matrixFlops));
  out.table = std::move(table);
  out.timingMode = onMeta ? "none" : timingModeName(timing.used);
  out.device = device.str();
  return out;
}

}  // namespace torchutil

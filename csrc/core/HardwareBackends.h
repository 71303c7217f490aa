#pragma once
// The seam under the hardware, torch-free: what a profile asks of the GPU's activity tracer and
// of its counter profilers, as small interfaces. The CUPTI implementations (csrc/cupti, built
// with TORCHUTIL_WITH_CUPTI) stand behind them, chosen by csrc/libtorch/HardwareBackends.h, which
// also holds what a build without CUPTI answers. Tests pass fakes fed hand-built records
// (tests/cpp/FakeTraceBackend.h, tests/cpp/FakeCounterBackend.h), so everything above them
// (passes, decoding, attribution, every status a user reads) runs on any machine, as kineto
// tests its profilers against mocks of CuptiActivityApi and of its range-profiler sessions.
//
// The counter interfaces are one method per step of CUPTI's own API (open, configure, enable,
// pass, decode, read a value), so that the loops between the steps are torchutil's, not CUPTI's:
// core/RangeProfilerController.h and core/PmSamplerController.h.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/HwCounters.h"
#include "core/KernelTrace.h"

namespace torchutil {

// The device a profile runs on, as the hardware layer sees it.
struct HwDevice {
  bool cuda = false;
  int index = -1;
  std::string name;  // "cpu", "cuda:0"
};

// What a failed vendor call means for the user, where it means more than the call's own text.
enum class HwFailure : uint8_t {
  Other,
  NoPermission,   // the driver restricts performance counters to administrators
  NotSupported,   // this GPU, driver, virtual machine or sandbox has no counters
  OtherProfiler,  // ncu, nsys, torch.profiler or DCGM holds them
};
// The one sentence of a failed call: "<what it means>. <call> failed (<message>)", or only
// "<call> failed (<message>)" for Other. csrc/cupti/CuptiStatus.h turns CUPTI's results into it;
// fakes use it to fail as CUPTI does.
std::string explainFailure(HwFailure kind, std::string_view call, std::string_view message);

// ---- Kernel tracing ----

// For the counted forward: a clock for op events (the one kernel records use, ns), and calls
// that mark the CUDA work each op launches with an external id (the op event's index + 1).
// Plain functions: the dispatcher calls them for every op, and CountSession keeps the clock.
struct TraceHooks {
  uint64_t (*clock)() = nullptr;
  void (*push)(uint64_t externalId) = nullptr;
  void (*pop)() = nullptr;
};

// How a trace ties each launch of the counted forward to the op that made it.
enum class Correlation : uint8_t {
  // Launch order (correlateByMarkers, core/KernelTrace.h): a marker at every change of the
  // innermost open op. No API call is recorded, so nothing keeps slowing the process's launches
  // after the trace (CUPTI's API records do: ActivityTrace::detachWhenDone). For forwards whose
  // ops run on one thread.
  Markers,
  // CUPTI's external correlation: a record of every runtime and driver API call, each with the
  // external id open on its thread. For forwards that may run ops on other threads
  // (TorchScript's fork), whose launches interleave with this thread's.
  ApiRecords,
  // The counted forward is the forward a CUDA graph captures: every node the capture creates
  // belongs to the innermost op open then (CUPTI's graph-node callbacks, on while the trace
  // correlates), and the replays' records carry their node (attributeByGraphNodes). No eager
  // forward is traced: the traced replays are attributed directly, and nothing is issued or
  // recorded per launch. Opt-in (TORCHUTIL_CUPTI_CORRELATION=graph): CUPTI's callback
  // subscriber leaves the process's later eager launches slower, as API records do.
  GraphNodes,
  // The same without CUPTI's callbacks: at every change of the innermost op during the capture
  // the tracer asks CUDA how many nodes the capture holds (cudaStreamGetCaptureInfo), and at its
  // end which nodes they are; the traced replays are attributed by position against that
  // sequence (capturedSequence, attributeByPosition). The default where the counted forward is
  // captured (core/ProfilePlan.h; TORCHUTIL_CUPTI_CORRELATION=markers asks for Markers instead).
  CaptureNodes,
  // None: kernel records only, attributed to no op (TORCHUTIL_CUPTI_CORRELATION=0, a
  // measurement switch of benchmarks/trace_cost.py).
  None,
};

// One running trace of kernel, memcpy and memset records; the destructor disables what it
// enabled and never throws.
class ActivityTrace {
 public:
  virtual ~ActivityTrace() = default;
  // Ends the correlation of launches with external ids (the counted forward is over; with
  // GraphNodes, its graph is instantiated); kernel records go on.
  virtual void stopCorrelating() = 0;
  // Delivers every record so far (the caller has synchronized the device).
  virtual void flush() = 0;
  virtual std::vector<KernelRecord> takeKernels() = 0;
  // Launch correlation id -> external id pushed for it; called after takeKernels.
  virtual std::unordered_map<uint32_t, uint64_t> takeExternalIds() = 0;
  // Correlation::GraphNodes: the op of every node the capture created, and the clones
  // instantiation made of them; empty for the other correlations.
  virtual GraphNodeOps takeGraphNodes() { return {}; }
  // Correlation::CaptureNodes: the capture of the counted forward begins on this stream (a
  // cudaStream_t), and ends (still capturing: the nodes are read then); what it recorded.
  virtual void captureBegins(void* /*stream*/) {}
  virtual void captureEnds() {}
  virtual CapturedForward takeCapturedForward() { return {}; }
  // The traced forwards start now (the device is idle). A trace may leave its records off until
  // then (CaptureNodes: nothing before the traced replays is wanted, and records on during the
  // capture slow it); a no-op for traces that record from their start.
  virtual void recordFromNow() {}
  // Records lost (buffers full); a non-zero count makes the trace incomplete.
  virtual uint64_t dropped() const = 0;
  // Whether the tracer detaches from the process when the trace ends (CUPTI: cuptiFinalize),
  // so that nothing it hooked keeps slowing the process; a no-op for tracers with nothing to
  // detach.
  virtual void detachWhenDone(bool /*detach*/) {}
};

class TraceBackend {
 public:
  virtual ~TraceBackend() = default;
  // Why a trace cannot start on the device now ("" when it can).
  virtual std::string unavailableReason(const HwDevice& device) const = 0;
  // Starts a trace that correlates launches as `how` says, or returns null and sets *why;
  // nothing stays enabled then.
  virtual std::unique_ptr<ActivityTrace> start(std::string* why, Correlation how) = 0;
  virtual TraceHooks hooks() const = 0;
};

namespace hw {

// ---- Hardware counters ----
// Every method that can fail returns false and sets *why (a sentence for the status, from
// explainFailure where CUPTI refused). Destructors release whatever is still enabled, on every
// path, exceptions of the model's own forward included.

// What both counter profilers do with CUPTI's profiler host: open the profiler on a device,
// know the chip's metric names, and configure metrics.
class CounterHostApi {
 public:
  virtual ~CounterHostApi() = default;
  // Opens the profiler on device deviceIndex: the chip, and which counters are available (where
  // a missing permission shows first).
  virtual bool open(int deviceIndex, std::string* why) = 0;
  virtual std::string chip() const = 0;
  // Whether the chip has a metric of this name.
  virtual bool knows(const std::string& metric) const = 0;
  // Whether a configuration of this metric alone is accepted.
  virtual bool accepts(const std::string& metric) = 0;
  // Starts a new configuration of these metrics, replacing any before; false when it is refused.
  virtual bool addMetrics(const std::vector<std::string>& metrics, std::string* why) = 0;
  // Builds the configuration; *passes: the replay passes its metrics need.
  virtual bool buildConfig(size_t* passes, std::string* why) = 0;
};

// CUPTI's range profiler: auto ranges (one per kernel) collected over passes.
class RangeProfilerApi : public CounterHostApi {
 public:
  // Enables the profiler with the configuration on the current context: passes by user or
  // kernel replay, room for maxRanges ranges.
  virtual bool enable(Replay replay, size_t maxRanges, std::string* why) = 0;
  virtual bool beginPass(std::string* why) = 0;
  // Ends the pass begun; *allSubmitted: CUPTI has every pass the configuration needs.
  virtual bool endPass(bool* allSubmitted, std::string* why) = 0;
  // Decodes what the passes collected: *ranges stored, *dropped ranges it could not store.
  virtual bool decode(size_t* ranges, size_t* dropped, std::string* why) = 0;
  // Range i: its name and the configured metrics' values, in the order they were added.
  virtual bool range(size_t i, std::string* name, std::vector<double>* values,
                     std::string* why) = 0;
};

// One decode of the PM sampler's hardware buffer into a fresh counter data image.
struct PmDecoded {
  size_t samples = 0;       // completed samples in the image
  bool imageFull = false;   // the image filled before the buffer was empty: decode again
  bool overflow = false;    // CUPTI flagged an overflow: samples after it are lost
  bool bufferLost = false;  // the buffer overflowed and nothing in it can be decoded
};

// CUPTI's PM sampler: GPU-wide samples at a fixed interval into a hardware buffer.
class PmSamplerApi : public CounterHostApi {
 public:
  // Enables sampling of the configuration on the device opened, every intervalNs, into a
  // hardware buffer of bufferBytes, decoded into counter data images of imageSamples samples.
  virtual bool enable(uint64_t intervalNs, size_t bufferBytes, size_t imageSamples,
                      std::string* why) = 0;
  virtual bool start(std::string* why) = 0;
  virtual bool stop(std::string* why) = 0;
  virtual bool decode(PmDecoded* out, std::string* why) = 0;
  // Sample i of the image decoded last: its interval (the sampler's clock, ns) and the
  // configured metrics' values, in the order they were added.
  virtual bool sample(size_t i, uint64_t* startNs, uint64_t* endNs, std::vector<double>* values,
                      std::string* why) = 0;
};

class CounterBackend {
 public:
  virtual ~CounterBackend() = default;
  // Why counters cannot be read on the device now ("" when they may be).
  virtual std::string unavailableReason(const HwDevice& device) const = 0;
  virtual std::unique_ptr<RangeProfilerApi> rangeProfiler() = 0;
  virtual std::unique_ptr<PmSamplerApi> pmSampler() = 0;
};

}  // namespace hw

// The backends a profile uses (ProfileOptions::backends); a null member is the default one
// (CUPTI, or what a build without it says).
struct HardwareBackends {
  TraceBackend* trace = nullptr;
  hw::CounterBackend* counters = nullptr;
};

}  // namespace torchutil

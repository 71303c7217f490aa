#include "libtorch/KernelTracing.h"

#include "libtorch/Devices.h"

#ifdef TORCHUTIL_WITH_CUPTI
#include "cupti/CuptiTracer.h"
#endif

namespace torchutil {

#ifdef TORCHUTIL_WITH_CUPTI
namespace {

class CuptiKernelTracing final : public KernelTracing {
 public:
  explicit CuptiKernelTracing(c10::Device device) : device_(device) {
    hooks_.clock = &cupti::CuptiTracer::timestamp;
    hooks_.push = &cupti::CuptiTracer::pushExternalId;
    hooks_.pop = &cupti::CuptiTracer::popExternalId;
    synchronizeDevice(device_);
    tracer_ = std::make_unique<cupti::CuptiTracer>();
    begin_ = cupti::CuptiTracer::timestamp();
  }

  const TraceHooks* hooks() const override { return &hooks_; }

  void countedDone() override {
    synchronizeDevice(device_);
    tracer_->stopCorrelating();
    countedEnd_ = cupti::CuptiTracer::timestamp();
  }

  void timedStart() override { timedBegin_ = cupti::CuptiTracer::timestamp(); }

  void finish(std::vector<KernelRecord>* counted, std::vector<KernelRecord>* timed) override {
    synchronizeDevice(device_);
    tracer_->flush();
    std::vector<KernelRecord> all = tracer_->takeKernels();
    const auto external = tracer_->takeExternalIds();
    dropped_ = tracer_->droppedRecords();
    tracer_.reset();  // releases CUPTI now, not at the end of the call
    for (KernelRecord& k : all) {
      if (k.startNs >= begin_ && k.startNs < countedEnd_) {
        counted->push_back(std::move(k));
      } else if (timedBegin_ != 0 && k.startNs >= timedBegin_) {
        k.timed = true;
        timed->push_back(std::move(k));
      }
    }
    attributeCounted(*counted, external);
  }

  uint64_t dropped() const override { return dropped_; }

 private:
  c10::Device device_;
  TraceHooks hooks_;
  std::unique_ptr<cupti::CuptiTracer> tracer_;
  uint64_t begin_ = 0;
  uint64_t countedEnd_ = 0;
  uint64_t timedBegin_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace
#endif

std::unique_ptr<KernelTracing> KernelTracing::start(c10::Device device, std::string* status) {
  if (!device.is_cuda()) {
    *status = "off: kernel tracing needs a CUDA device, got " + device.str();
    return nullptr;
  }
#ifdef TORCHUTIL_WITH_CUPTI
  const std::string reason = cupti::CuptiTracer::unavailableReason();
  if (!reason.empty()) {
    *status = "off: " + reason;
    return nullptr;
  }
  try {
    auto tracing = std::make_unique<CuptiKernelTracing>(device);
    *status = "on";
    return tracing;
  } catch (const c10::Error& e) {
    *status = std::string("off: ") + e.what_without_backtrace();
    return nullptr;
  }
#else
  *status = "off: torchutil was built without CUPTI (see torchutil.build_info())";
  return nullptr;
#endif
}

}  // namespace torchutil

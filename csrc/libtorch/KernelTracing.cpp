#include "libtorch/KernelTracing.h"

#include <c10/util/Exception.h>

#include <utility>

#include "libtorch/Devices.h"

namespace torchutil {

KernelTracing::KernelTracing(c10::Device device, TraceHooks hooks)
    : device_(device), hooks_(hooks) {}

KernelTracing::~KernelTracing() = default;

std::unique_ptr<KernelTracing> KernelTracing::start(c10::Device device, std::string* status,
                                                    TraceBackend& backend, Correlation how) {
  const std::string reason = backend.unavailableReason(hwDevice(device));
  if (!reason.empty()) {
    *status = "off: " + reason;
    return nullptr;
  }
  try {
    std::unique_ptr<KernelTracing> tracing(new KernelTracing(device, backend.hooks()));
    synchronizeDevice(device);
    std::string why;
    tracing->trace_ = backend.start(&why, how);
    if (!tracing->trace_) {
      *status = "off: " + why;
      return nullptr;
    }
    tracing->begin_ = tracing->hooks_.clock();
    *status = "on";
    return tracing;
  } catch (const c10::Error& e) {
    *status = std::string("off: ") + e.what_without_backtrace();
    return nullptr;
  }
}

void KernelTracing::countedDone() {
  synchronizeDevice(device_);
  trace_->stopCorrelating();
  countedEnd_ = hooks_.clock();
}

void KernelTracing::timedStart() {
  timedBegin_ = hooks_.clock();
}

void KernelTracing::finish(std::vector<KernelRecord>* counted, std::vector<KernelRecord>* timed) {
  synchronizeDevice(device_);
  trace_->flush();
  std::vector<KernelRecord> all = trace_->takeKernels();
  const auto external = trace_->takeExternalIds();  // after takeKernels (ActivityTrace)
  dropped_ = trace_->dropped();
  trace_.reset();  // releases the backend now, not at the end of the call
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

}  // namespace torchutil

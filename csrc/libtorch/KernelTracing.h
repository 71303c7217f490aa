#pragma once
// Kernel tracing for one profile: CUPTI records around the counted forward (attributed to ops
// through external correlation) and the timed forwards. Without CUPTI in the build, start()
// says so and the profile runs without kernel records.
#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/KernelTrace.h"
#include "libtorch/OpCounter.h"

namespace torchutil {

class KernelTracing {
 public:
  // Starts tracing on device, or returns null and sets *status to why not ("off: ...").
  static std::unique_ptr<KernelTracing> start(c10::Device device, std::string* status);
  virtual ~KernelTracing() = default;

  // Hooks for the counted forward (op events and external correlation).
  virtual const TraceHooks* hooks() const = 0;
  // The counted forward has been launched: waits for the device and marks the boundary.
  virtual void countedDone() = 0;
  // The timed forwards start now (the device is idle).
  virtual void timedStart() = 0;
  // Waits for the device, stops tracing and returns the records of the counted forward
  // (attributed to op events) and of the timed forwards.
  virtual void finish(std::vector<KernelRecord>* counted, std::vector<KernelRecord>* timed) = 0;
  // Records CUPTI dropped (buffers full); a non-zero count makes the figures incomplete.
  virtual uint64_t dropped() const = 0;
};

}  // namespace torchutil

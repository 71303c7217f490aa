#pragma once
// The phases of one profile call (the phase_*_seconds fields): a timer that adds its scope's
// wall time to one phase, and the gpu_lock that every phase running work on the GPU holds,
// waiting for which is a phase of its own.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/FileLock.h"
#include "libtorch/Profile.h"
#include "libtorch/ValueErrors.h"

namespace torchutil {

using Clock = std::chrono::steady_clock;

inline double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Adds the wall time of its scope to one phase.
class PhaseTimer {
 public:
  explicit PhaseTimer(double* phase) : phase_(phase), start_(Clock::now()) {}
  ~PhaseTimer() { *phase_ += secondsSince(start_); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  double* phase_;
  Clock::time_point start_;
};

// Writes the phases into the summary's phase_* fields.
void setPhases(std::vector<double>& summary, const PhaseSeconds& p);

// gpu_lock (a FileLock on the path given, none without one); hold() times its wait into *wait.
class GpuLock {
 public:
  GpuLock(const std::optional<std::string>& path, double* wait) : wait_(wait) {
    if (path.has_value()) {
      lock_ = valueErrors([&] { return std::make_unique<FileLock>(*path); });
    }
  }
  void hold() {
    if (lock_ && !lock_->held()) {
      PhaseTimer t(wait_);
      valueErrors([&] { lock_->lock(); });
    }
  }
  void release() {
    if (lock_) {
      lock_->unlock();
    }
  }

 private:
  std::unique_ptr<FileLock> lock_;
  double* wait_;
};

}  // namespace torchutil

#pragma once
// gpu_lock (torchutil.profile's argument): the lock file of processes that share one GPU.
// Every phase that runs work on the GPU holds it exclusively; the phases that only make CUDA
// calls (a capture, the graph's destruction at the end of the call) hold it shared, so that
// no other process's calls run beside a timed forward (eight sweep workers capturing beside
// the one that timed made its forwards measure ~5 % faster than one process alone does) while
// captures still overlap each other. Waiting for it is a phase of its own.
// TORCHUTIL_GPU_LOCK_SHARED=0 (a diagnostic) releases it instead of sharing it.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "core/FileLock.h"
#include "libtorch/ValueErrors.h"

namespace torchutil {

class GpuLock {
 public:
  GpuLock(const std::optional<std::string>& path, double* wait) : wait_(wait) {
    if (path.has_value()) {
      lock_ = valueErrors([&] { return std::make_unique<FileLock>(*path); });
    }
    const char* v = std::getenv("TORCHUTIL_GPU_LOCK_SHARED");
    share_ = v == nullptr || std::strcmp(v, "0") != 0;
  }
  void hold() { take(FileLock::Mode::Exclusive); }
  void share() { take(share_ ? FileLock::Mode::Shared : FileLock::Mode::None); }

 private:
  void take(FileLock::Mode mode) {
    if (lock_ && lock_->mode() != mode) {
      const auto t0 = std::chrono::steady_clock::now();
      valueErrors([&] { lock_->lock(mode); });
      *wait_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  std::unique_ptr<FileLock> lock_;  // its destructor unlocks
  double* wait_;
  bool share_ = true;
};

}  // namespace torchutil

#include "libtorch/MeasuredRate.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>

#include "libtorch/Devices.h"

namespace torchutil {

double bestRate(c10::Device device, const std::function<void()>& call, int perRep,
                double unitsPerCall) {
  double best = 0.0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  for (int rep = 0; rep < 12; ++rep) {
    synchronizeDevice(device);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < perRep; ++i) {
      call();
    }
    synchronizeDevice(device);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) {
      best = std::max(best, unitsPerCall * perRep / s);
    }
    if (rep >= 3 && std::chrono::steady_clock::now() > deadline) {
      break;
    }
  }
  return best;
}

double memoized(const std::string& key, const std::function<double()>& measure) {
  static std::mutex mutex;
  static std::map<std::string, double> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) {
      return it->second;
    }
  }
  const double value = measure();  // not under the lock: it runs for a second or more
  std::lock_guard<std::mutex> lock(mutex);
  return cache.emplace(key, value).first->second;
}

}  // namespace torchutil

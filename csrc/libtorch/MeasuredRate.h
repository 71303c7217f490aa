#pragma once
// Measured device rates (the "measured" peak FLOP/s and copy bandwidth): a timing loop and a
// per-process cache.
#include <c10/core/Device.h>

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

namespace torchutil {

// The rate of `call` on device, in `unitsPerCall` per second, of each repetition of `perRep`
// calls, each synchronized at both ends: up to 11 (about 1.5 s, at least 3) after a first one
// that is left out (library initialization, page faults).
std::vector<double> timedRates(c10::Device device, const std::function<void()>& call, int perRep,
                               double unitsPerCall);

// The best of timedRates.
double bestRate(c10::Device device, const std::function<void()>& call, int perRep,
                double unitsPerCall);

// A measured value of type T kept for the life of the process under key; measure runs once per
// key. One cache per T.
template <class T>
T memoizedValue(const std::string& key, const std::function<T()>& measure) {
  static std::mutex mutex;
  static std::map<std::string, T> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) {
      return it->second;
    }
  }
  T value = measure();  // not under the lock: it runs for a second or more
  std::lock_guard<std::mutex> lock(mutex);
  return cache.emplace(key, std::move(value)).first->second;
}

template <class Measure>
auto memoized(const std::string& key, const Measure& measure) {
  using T = std::decay_t<decltype(measure())>;
  return memoizedValue<T>(key, std::function<T()>(measure));
}

}  // namespace torchutil

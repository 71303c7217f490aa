#include "libtorch/MeasuredRate.h"

#include <algorithm>
#include <chrono>

#include "libtorch/Devices.h"

namespace torchutil {

std::vector<double> timedRates(c10::Device device, const std::function<void()>& call, int perRep,
                               double unitsPerCall) {
  std::vector<double> rates;
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
      rates.push_back(unitsPerCall * perRep / s);
    }
    if (rep >= 3 && std::chrono::steady_clock::now() > deadline) {
      break;
    }
  }
  return rates;
}

double bestRate(c10::Device device, const std::function<void()>& call, int perRep,
                double unitsPerCall) {
  const std::vector<double> rates = timedRates(device, call, perRep, unitsPerCall);
  return rates.empty() ? 0.0 : *std::max_element(rates.begin(), rates.end());
}

}  // namespace torchutil

// What a clock read costs on this host, in C++ (no ctypes floor): CLOCK_REALTIME (the clock every
// kernel trace registers with CUPTI, and the one op events read), CLOCK_MONOTONIC
// (std::chrono::steady_clock: the phase and stage timers), and cuptiGetTimestamp. On a VM whose
// clock source is not the TSC, clock_gettime leaves the vDSO for a system call.
//
//   g++ -O2 -std=c++17 benchmarks/cost/clock_cost.cpp -I/usr/local/cuda/include \
//       -L/usr/local/cuda/lib64 -lcupti -o /tmp/clock_cost && /tmp/clock_cost
#include <cupti.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

template <class F>
double nsPerCall(F f, int calls) {
  std::vector<double> batches;
  for (int b = 0; b < 7; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) {
      f();
    }
    const auto t1 = std::chrono::steady_clock::now();
    batches.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / calls);
  }
  std::sort(batches.begin(), batches.end());
  return batches[batches.size() / 2];
}

}  // namespace

int main() {
  std::string source = "?";
  std::ifstream("/sys/devices/system/clocksource/clocksource0/current_clocksource") >> source;
  const int calls = 200000;
  volatile uint64_t sink = 0;
  timespec ts{};
  const double realtime = nsPerCall([&] { clock_gettime(CLOCK_REALTIME, &ts); sink += ts.tv_nsec; }, calls);
  const double monotonic = nsPerCall([&] { clock_gettime(CLOCK_MONOTONIC, &ts); sink += ts.tv_nsec; }, calls);
  const double steady =
      nsPerCall([&] { sink += std::chrono::steady_clock::now().time_since_epoch().count(); }, calls);
  uint64_t t = 0;
  const double cupti = nsPerCall([&] { cuptiGetTimestamp(&t); sink += t; }, calls);
  std::printf("clock source %s; ns per call, median of 7 batches of %d:\n", source.c_str(), calls);
  std::printf("  clock_gettime(CLOCK_REALTIME)   %8.1f\n", realtime);
  std::printf("  clock_gettime(CLOCK_MONOTONIC)  %8.1f\n", monotonic);
  std::printf("  std::chrono::steady_clock::now  %8.1f\n", steady);
  std::printf("  cuptiGetTimestamp               %8.1f\n", cupti);
  return 0;
}

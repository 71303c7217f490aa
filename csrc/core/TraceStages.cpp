#include "core/TraceStages.h"

#include <array>
#include <atomic>
#include <cstddef>

namespace torchutil {
namespace {

constexpr size_t kStages = static_cast<size_t>(TraceStage::kCount);

struct Sums {
  std::array<std::atomic<uint64_t>, kStages> ns{};
  std::array<std::atomic<uint64_t>, kStages> times{};
};

Sums& sums() {
  static Sums s;
  return s;
}

}  // namespace

const char* traceStageName(TraceStage stage) {
  switch (stage) {
    case TraceStage::Start: return "start";
    case TraceStage::Sync: return "sync";
    case TraceStage::Query: return "query";
    case TraceStage::ReadNodes: return "read_nodes";
    case TraceStage::RecordsOn: return "records_on";
    case TraceStage::Flush: return "flush";
    case TraceStage::Attribute: return "attribute";
    case TraceStage::Release: return "release";
    case TraceStage::kCount: break;
  }
  return "?";
}

void addTraceStage(TraceStage stage, uint64_t ns) {
  const auto i = static_cast<size_t>(stage);
  if (i >= kStages) {
    return;
  }
  sums().ns[i].fetch_add(ns, std::memory_order_relaxed);
  sums().times[i].fetch_add(1, std::memory_order_relaxed);
}

std::vector<TraceStageTotal> takeTraceStages() {
  std::vector<TraceStageTotal> out;
  out.reserve(kStages);
  for (size_t i = 0; i < kStages; ++i) {
    TraceStageTotal t;
    t.stage = traceStageName(static_cast<TraceStage>(i));
    t.times = sums().times[i].exchange(0, std::memory_order_relaxed);
    t.seconds = static_cast<double>(sums().ns[i].exchange(0, std::memory_order_relaxed)) * 1e-9;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace torchutil

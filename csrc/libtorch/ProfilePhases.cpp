#include "libtorch/ProfilePhases.h"

#include "core/ResultSchema.h"

namespace torchutil {

void setPhases(std::vector<double>& summary, const PhaseSeconds& p) {
  const auto set = [&](Field f, double v) { summary[static_cast<size_t>(f)] = v; };
  set(Field::call_seconds, p.call);
  set(Field::phase_warmup_seconds, p.warmup);
  set(Field::phase_count_seconds, p.count);
  set(Field::phase_capture_seconds, p.capture);
  set(Field::phase_trace_seconds, p.trace);
  set(Field::phase_time_seconds, p.time);
  set(Field::phase_counters_seconds, p.counters);
  set(Field::phase_wait_seconds, p.wait);
  set(Field::phase_assemble_seconds, p.assemble);
}

}  // namespace torchutil

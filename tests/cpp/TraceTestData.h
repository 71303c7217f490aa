#pragma once
// Synthetic kernel records shared by the C++ tests (KernelTraceTest, HwResultTest, the fakes and
// the torch layer's tracing tests): one builder, as CUPTI would report a record.
#include <cstdint>
#include <string>
#include <vector>

#include "core/CountSession.h"
#include "core/KernelTrace.h"

namespace torchutil::testdata {

// A record of `kind` named `name` over [start, end) ns; the rest as CUPTI leaves it.
inline KernelRecord record(KernelRecord::Kind kind, const std::string& name, uint64_t start,
                           uint64_t end) {
  KernelRecord k;
  k.kind = kind;
  k.name = name;
  k.startNs = start;
  k.endNs = end;
  return k;
}

// A kernel launched by the API call with correlationId, on a stream.
inline KernelRecord kernel(const std::string& name, uint64_t start, uint64_t end,
                           uint32_t correlationId = 0, uint32_t stream = 7) {
  KernelRecord k = record(KernelRecord::Kind::Kernel, name, start, end);
  k.correlationId = correlationId;
  k.stream = stream;
  return k;
}

// A record already attributed to op event opEvent (-1: none), of the counted forward or (timed)
// of a traced one.
inline KernelRecord attributed(KernelRecord::Kind kind, uint64_t start, uint64_t end,
                               int64_t opEvent, bool timed = false) {
  KernelRecord k = record(kind, "k", start, end);
  k.opEvent = opEvent;
  k.timed = timed;
  return k;
}

// The op events of a counted forward of these ops, event i the op of op-table row i.
inline std::vector<OpEvent> opEvents(const std::vector<std::string>& ops) {
  std::vector<OpEvent> events(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    events[i].op = ops[i];
    events[i].row = static_cast<int64_t>(i);
  }
  return events;
}

}  // namespace torchutil::testdata

#pragma once
// CUPTI activity records decoded into KernelRecords. Reads the record structs of cupti.h and
// calls no CUPTI function (the buffer walk stays in CuptiTracer.cpp), so tests build records
// by hand on a machine without a GPU; torch-free.
#include <cupti.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/KernelTrace.h"

namespace torchutil::cupti {

// The record versions read. CUPTI writes its newest version of each kind, and the newer
// versions keep these fields where they are (Kernel10 appends to Kernel9).
using KernelActivity = CUpti_ActivityKernel9;
using MemcpyActivity = CUpti_ActivityMemcpy6;
using MemsetActivity = CUpti_ActivityMemset4;

// The kind of the external ids torchutil pushes for its ops; Kineto (torch.profiler) uses
// CUSTOM0 and CUSTOM1.
constexpr CUpti_ExternalCorrelationKind kExternalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;

struct DecodedActivity {
  std::vector<KernelRecord> kernels;  // kernels, memcpys and memsets, in record order
  std::unordered_map<uint32_t, uint64_t> externalIds;  // correlation id -> torchutil's external id
  uint64_t dropped = 0;                                // records CUPTI could not store

  // Kernel (KERNEL, CONCURRENT_KERNEL), MEMCPY and MEMSET records become KernelRecords named as
  // torch.profiler names them; EXTERNAL_CORRELATION records of kExternalKind map their
  // correlation id; every other record is ignored.
  void add(const CUpti_Activity& record);
  // What decoding another buffer gave; a later external id for a correlation id wins.
  void append(DecodedActivity&& other);
};

}  // namespace torchutil::cupti

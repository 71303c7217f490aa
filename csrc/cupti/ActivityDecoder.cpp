#include "cupti/ActivityDecoder.h"

#include <cstdint>
#include <iterator>
#include <string>
#include <utility>

#include "core/KernelName.h"

namespace torchutil::cupti {
namespace {

// Record fields become KernelName's enums by a cast, so the two must hold the same values.
template <class Ours, class Cupti, size_t N>
constexpr bool sameValues(const std::pair<Ours, Cupti> (&pairs)[N]) {
  for (const auto& p : pairs) {
    if (static_cast<int64_t>(p.first) != static_cast<int64_t>(p.second)) {
      return false;
    }
  }
  return true;
}
constexpr std::pair<MemcpyKind, CUpti_ActivityMemcpyKind> kMemcpyKinds[] = {
    {MemcpyKind::Unknown, CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN},
    {MemcpyKind::HtoD, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD},
    {MemcpyKind::DtoH, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH},
    {MemcpyKind::HtoA, CUPTI_ACTIVITY_MEMCPY_KIND_HTOA},
    {MemcpyKind::AtoH, CUPTI_ACTIVITY_MEMCPY_KIND_ATOH},
    {MemcpyKind::AtoA, CUPTI_ACTIVITY_MEMCPY_KIND_ATOA},
    {MemcpyKind::AtoD, CUPTI_ACTIVITY_MEMCPY_KIND_ATOD},
    {MemcpyKind::DtoA, CUPTI_ACTIVITY_MEMCPY_KIND_DTOA},
    {MemcpyKind::DtoD, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD},
    {MemcpyKind::HtoH, CUPTI_ACTIVITY_MEMCPY_KIND_HTOH},
    {MemcpyKind::PtoP, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP}};
static_assert(sameValues(kMemcpyKinds), "MemcpyKind must hold CUpti_ActivityMemcpyKind's values");
constexpr std::pair<MemoryKind, CUpti_ActivityMemoryKind> kMemoryKinds[] = {
    {MemoryKind::Unknown, CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN},
    {MemoryKind::Pageable, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE},
    {MemoryKind::Pinned, CUPTI_ACTIVITY_MEMORY_KIND_PINNED},
    {MemoryKind::Device, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE},
    {MemoryKind::Array, CUPTI_ACTIVITY_MEMORY_KIND_ARRAY},
    {MemoryKind::Managed, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED},
    {MemoryKind::DeviceStatic, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC},
    {MemoryKind::ManagedStatic, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC}};
static_assert(sameValues(kMemoryKinds), "MemoryKind must hold CUpti_ActivityMemoryKind's values");

// The fields every kind of KernelRecord has.
template <class Activity>
KernelRecord common(const Activity& a, KernelRecord::Kind kind, std::string name) {
  KernelRecord r;
  r.kind = kind;
  r.name = std::move(name);
  r.startNs = a.start;
  r.endNs = a.end;
  r.device = a.deviceId;
  r.stream = a.streamId;
  r.correlationId = a.correlationId;
  r.graphId = a.graphId;
  r.graphNodeId = a.graphNodeId;
  return r;
}

KernelRecord kernelRecord(const KernelActivity& k) {
  KernelRecord r = common(k, KernelRecord::Kind::Kernel, demangleKernelName(k.name));
  r.grid[0] = k.gridX;
  r.grid[1] = k.gridY;
  r.grid[2] = k.gridZ;
  r.block[0] = k.blockX;
  r.block[1] = k.blockY;
  r.block[2] = k.blockZ;
  r.registersPerThread = k.registersPerThread;
  r.staticSharedBytes = k.staticSharedMemory;
  r.dynamicSharedBytes = k.dynamicSharedMemory;
  return r;
}

KernelRecord memcpyRecord(const MemcpyActivity& m) {
  KernelRecord r =
      common(m, KernelRecord::Kind::Memcpy,
             memcpyName(static_cast<MemcpyKind>(m.copyKind), static_cast<MemoryKind>(m.srcKind),
                        static_cast<MemoryKind>(m.dstKind)));
  r.bytes = m.bytes;
  return r;
}

KernelRecord memsetRecord(const MemsetActivity& m) {
  KernelRecord r =
      common(m, KernelRecord::Kind::Memset, memsetName(static_cast<MemoryKind>(m.memoryKind)));
  r.bytes = m.bytes;
  return r;
}

}  // namespace

void DecodedActivity::add(const CUpti_Activity& record) {
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      kernels.push_back(kernelRecord(reinterpret_cast<const KernelActivity&>(record)));
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      kernels.push_back(memcpyRecord(reinterpret_cast<const MemcpyActivity&>(record)));
      break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      kernels.push_back(memsetRecord(reinterpret_cast<const MemsetActivity&>(record)));
      break;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto& e = reinterpret_cast<const CUpti_ActivityExternalCorrelation&>(record);
      if (e.externalKind == kExternalKind) {
        externalIds[e.correlationId] = e.externalId;
      }
      break;
    }
    default: break;
  }
}

void DecodedActivity::append(DecodedActivity&& other) {
  kernels.insert(kernels.end(), std::make_move_iterator(other.kernels.begin()),
                 std::make_move_iterator(other.kernels.end()));
  for (const auto& [correlationId, externalId] : other.externalIds) {
    externalIds[correlationId] = externalId;
  }
  dropped += other.dropped;
}

}  // namespace torchutil::cupti

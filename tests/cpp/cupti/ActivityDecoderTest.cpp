// CUPTI activity records built by hand (as Kineto's MockCuptiActivities does), decoded without a
// GPU and without libcupti.
#include "cupti/ActivityDecoder.h"

#include <gtest/gtest.h>

#include <iterator>
#include <string>
#include <unordered_map>
#include <utility>

namespace torchutil::cupti {
namespace {

template <class Activity>
const CUpti_Activity& asActivity(const Activity& a) {
  return reinterpret_cast<const CUpti_Activity&>(a);
}

// A record with the fields every kind has; the others zero.
template <class Activity>
Activity activity(CUpti_ActivityKind kind, uint64_t start, uint64_t end, uint32_t device,
                  uint32_t stream, uint32_t correlationId) {
  Activity a{};
  a.kind = kind;
  a.start = start;
  a.end = end;
  a.deviceId = device;
  a.streamId = stream;
  a.correlationId = correlationId;
  return a;
}

KernelActivity kernelActivity(CUpti_ActivityKind kind, const char* name, uint64_t start,
                              uint64_t end, uint32_t correlationId) {
  auto k = activity<KernelActivity>(kind, start, end, /*device=*/1, /*stream=*/7, correlationId);
  k.name = name;
  return k;
}

MemcpyActivity memcpyActivity(uint8_t copyKind, uint8_t src, uint8_t dst, uint64_t bytes) {
  auto m = activity<MemcpyActivity>(CUPTI_ACTIVITY_KIND_MEMCPY, /*start=*/100, /*end=*/150,
                                    /*device=*/2, /*stream=*/13, /*correlationId=*/41);
  m.copyKind = copyKind;
  m.srcKind = src;
  m.dstKind = dst;
  m.bytes = bytes;
  return m;
}

MemsetActivity memsetActivity(uint16_t memoryKind, uint64_t bytes) {
  auto m = activity<MemsetActivity>(CUPTI_ACTIVITY_KIND_MEMSET, /*start=*/200, /*end=*/230,
                                    /*device=*/3, /*stream=*/14, /*correlationId=*/42);
  m.memoryKind = memoryKind;
  m.bytes = bytes;
  return m;
}

CUpti_ActivityExternalCorrelation externalActivity(CUpti_ExternalCorrelationKind kind,
                                                   uint32_t correlationId, uint64_t externalId) {
  return {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, kind, externalId, correlationId,
          /*reserved=*/0};
}

// The one KernelRecord a record decodes to.
template <class Activity>
KernelRecord decodeOne(const Activity& a) {
  DecodedActivity d;
  d.add(asActivity(a));
  EXPECT_EQ(d.kernels.size(), 1u);
  EXPECT_TRUE(d.externalIds.empty());
  EXPECT_EQ(d.dropped, 0u);
  return d.kernels.empty() ? KernelRecord{} : d.kernels[0];
}

TEST(ActivityDecoderTest, KernelsKeepTimesGeometryAndRegisters) {
  // CONCURRENT_KERNEL is the kind torchutil enables; KERNEL (serialized kernels) shares its
  // record.
  for (CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_KERNEL}) {
    KernelActivity k = kernelActivity(kind, "_Z20nhwcAddPaddingKernelI6__halfEvPKT_PS1_iiiii",
                                      /*start=*/1000, /*end=*/1750, /*correlationId=*/77);
    k.gridX = 64;
    k.gridY = 2;
    k.gridZ = 1;
    k.blockX = 256;
    k.blockY = 1;
    k.blockZ = 4;
    k.registersPerThread = 38;
    k.staticSharedMemory = 4096;
    k.dynamicSharedMemory = 16384;
    const KernelRecord r = decodeOne(k);
    EXPECT_EQ(r.kind, KernelRecord::Kind::Kernel);
    EXPECT_EQ(r.name,
              "void nhwcAddPaddingKernel<__half>(__half const*, __half*, int, int, int, int, int)");
    EXPECT_EQ(r.startNs, 1000u);
    EXPECT_EQ(r.endNs, 1750u);
    EXPECT_EQ(r.durationNs(), 750u);
    EXPECT_EQ(r.device, 1u);
    EXPECT_EQ(r.stream, 7u);
    EXPECT_EQ(r.correlationId, 77u);
    EXPECT_EQ(r.grid[0], 64);
    EXPECT_EQ(r.grid[1], 2);
    EXPECT_EQ(r.grid[2], 1);
    EXPECT_EQ(r.block[0], 256);
    EXPECT_EQ(r.block[1], 1);
    EXPECT_EQ(r.block[2], 4);
    EXPECT_EQ(r.registersPerThread, 38);
    EXPECT_EQ(r.staticSharedBytes, 4096);
    EXPECT_EQ(r.dynamicSharedBytes, 16384);
    EXPECT_EQ(r.bytes, 0u);
    EXPECT_EQ(r.graphId, 0u);
    EXPECT_EQ(r.opEvent, -1);  // attribution comes later
  }
}

TEST(ActivityDecoderTest, KernelNamesThatAreNotMangledStayAsCuptiGaveThem) {
  EXPECT_EQ(
      decodeOne(kernelActivity(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "nchwToNhwcKernel", 0, 1, 1))
          .name,
      "nchwToNhwcKernel");
}

TEST(ActivityDecoderTest, KernelWithoutANameHasAnEmptyOne) {
  EXPECT_EQ(decodeOne(kernelActivity(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, nullptr, 0, 1, 1)).name,
            "");
}

TEST(ActivityDecoderTest, MemcpyOfEveryCopyKindIsNamedAsTorchProfilerNamesIt) {
  const std::pair<CUpti_ActivityMemcpyKind, const char*> kinds[] = {
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, "HtoD"},        {CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, "DtoH"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOA, "HtoA"},        {CUPTI_ACTIVITY_MEMCPY_KIND_ATOH, "AtoH"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_ATOA, "AtoA"},        {CUPTI_ACTIVITY_MEMCPY_KIND_ATOD, "AtoD"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOA, "DtoA"},        {CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, "DtoD"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOH, "HtoH"},        {CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, "PtoP"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN, "<unknown>"}};
  for (const auto& [kind, name] : kinds) {
    const KernelRecord r = decodeOne(memcpyActivity(kind, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
                                                    CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 1 << 20));
    EXPECT_EQ(r.kind, KernelRecord::Kind::Memcpy);
    EXPECT_EQ(r.name, std::string("Memcpy ") + name + " (Pageable -> Device)");
    EXPECT_EQ(r.bytes, 1u << 20);
    EXPECT_EQ(r.startNs, 100u);
    EXPECT_EQ(r.endNs, 150u);
    EXPECT_EQ(r.device, 2u);
    EXPECT_EQ(r.stream, 13u);
    EXPECT_EQ(r.correlationId, 41u);
  }
}

TEST(ActivityDecoderTest, MemcpyNamesItsSourceAndDestinationMemory) {
  EXPECT_EQ(
      decodeOne(memcpyActivity(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                               CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 64))
          .name,
      "Memcpy DtoH (Device -> Pinned)");
  EXPECT_EQ(
      decodeOne(memcpyActivity(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED,
                               CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC, 64))
          .name,
      "Memcpy HtoD (Managed -> Device Static)");
}

TEST(ActivityDecoderTest, MemsetIsNamedByItsMemory) {
  const KernelRecord r = decodeOne(memsetActivity(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 4096));
  EXPECT_EQ(r.kind, KernelRecord::Kind::Memset);
  EXPECT_EQ(r.name, "Memset (Device)");
  EXPECT_EQ(r.bytes, 4096u);
  EXPECT_EQ(r.startNs, 200u);
  EXPECT_EQ(r.endNs, 230u);
  EXPECT_EQ(r.device, 3u);
  EXPECT_EQ(r.stream, 14u);
  EXPECT_EQ(r.correlationId, 42u);
  EXPECT_EQ(decodeOne(memsetActivity(CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, 8)).name,
            "Memset (Managed)");
}

TEST(ActivityDecoderTest, GraphIdsAreKeptForEveryKind) {
  KernelActivity k = kernelActivity(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "graphed", 0, 1, 1);
  k.graphId = 11;
  MemcpyActivity c =
      memcpyActivity(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                     CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 8);
  c.graphId = 12;
  MemsetActivity m = memsetActivity(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 8);
  m.graphId = 13;
  EXPECT_EQ(decodeOne(k).graphId, 11u);
  EXPECT_EQ(decodeOne(c).graphId, 12u);
  EXPECT_EQ(decodeOne(m).graphId, 13u);
  // And their node in the executable graph, which graph-node correlation reads.
  k.graphNodeId = 0x100000021;
  c.graphNodeId = 22;
  m.graphNodeId = 23;
  EXPECT_EQ(decodeOne(k).graphNodeId, 0x100000021u);
  EXPECT_EQ(decodeOne(c).graphNodeId, 22u);
  EXPECT_EQ(decodeOne(m).graphNodeId, 23u);
}

TEST(ActivityDecoderTest, OnlyTorchutilsExternalCorrelationKindIsKept) {
  DecodedActivity d;
  d.add(asActivity(externalActivity(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, 100, 5)));
  d.add(asActivity(externalActivity(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 101, 6)));  // Kineto's
  d.add(asActivity(externalActivity(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 102, 7)));  // Kineto's
  d.add(asActivity(externalActivity(CUPTI_EXTERNAL_CORRELATION_KIND_OPENACC, 103, 8)));
  d.add(asActivity(externalActivity(CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN, 104, 9)));
  d.add(asActivity(externalActivity(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, 105, 0)));
  EXPECT_EQ(d.externalIds, (std::unordered_map<uint32_t, uint64_t>{{100, 5}, {105, 0}}));
  EXPECT_TRUE(d.kernels.empty());
}

TEST(ActivityDecoderTest, OtherKindsAreIgnored) {
  // The runtime and driver API records CUPTI emits while correlating, and kinds never enabled.
  CUpti_ActivityAPI api{};
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  api.correlationId = 1;
  DecodedActivity d;
  d.add(asActivity(api));
  api.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  d.add(asActivity(api));
  CUpti_Activity other{};
  for (CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_INVALID, CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_OVERHEAD,
        CUPTI_ACTIVITY_KIND_MARKER, static_cast<CUpti_ActivityKind>(0x7ffffff0)}) {
    other.kind = kind;
    d.add(other);
  }
  EXPECT_TRUE(d.kernels.empty());
  EXPECT_TRUE(d.externalIds.empty());
  EXPECT_EQ(d.dropped, 0u);
}

TEST(ActivityDecoderTest, BuffersAppendInOrderAndDroppedRecordsAccumulate) {
  DecodedActivity all;
  DecodedActivity first;
  first.add(asActivity(kernelActivity(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "first", 0, 1, 1)));
  first.add(asActivity(externalActivity(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, 1, 10)));
  first.dropped = 3;
  all.append(std::move(first));
  DecodedActivity second;
  second.add(asActivity(kernelActivity(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "second", 2, 3, 2)));
  second.add(asActivity(memsetActivity(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 4)));
  second.add(asActivity(externalActivity(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, 2, 20)));
  second.add(asActivity(externalActivity(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, 1, 11)));
  second.dropped = 4;
  all.append(std::move(second));
  all.append(DecodedActivity{});
  ASSERT_EQ(all.kernels.size(), 3u);
  EXPECT_EQ(all.kernels[0].name, "first");
  EXPECT_EQ(all.kernels[1].name, "second");
  EXPECT_EQ(all.kernels[2].name, "Memset (Device)");
  EXPECT_EQ(all.externalIds, (std::unordered_map<uint32_t, uint64_t>{{1, 11}, {2, 20}}));
  EXPECT_EQ(all.dropped, 7u);
}

}  // namespace
}  // namespace torchutil::cupti

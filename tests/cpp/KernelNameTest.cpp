// Kernel, memcpy and memset names as torch.profiler (Kineto) shows them.
#include "core/KernelName.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace torchutil {
namespace {

TEST(KernelNameTest, DemanglesCppKernelNames) {
  EXPECT_EQ(demangleKernelName("_Z20nhwcAddPaddingKernelI6__halfEvPKT_PS1_iiiii"),
            "void nhwcAddPaddingKernel<__half>(__half const*, __half*, int, int, int, int, int)");
  EXPECT_EQ(demangleKernelName("_ZN2at6native27unrolled_elementwise_kernelILi4EEEviPf"),
            "void at::native::unrolled_elementwise_kernel<4>(int, float*)");
  EXPECT_EQ(demangleKernelName("_Z10add_kernelPfPKfS1_i"),
            "add_kernel(float*, float const*, float const*, int)");
}

TEST(KernelNameTest, KeepsNamesThatAreNotMangled) {
  EXPECT_EQ(demangleKernelName("nchwToNhwcKernel"), "nchwToNhwcKernel");  // extern "C"
  EXPECT_EQ(demangleKernelName("_ZN3cub6detail"), "_ZN3cub6detail");      // not a whole symbol
  EXPECT_EQ(demangleKernelName(""), "");
  EXPECT_EQ(demangleKernelName(nullptr), "");
}

TEST(KernelNameTest, DemanglesWhatKinetoDemangles) {
  // Kineto hands every name to __cxa_demangle, which reads a lone letter as a builtin type's
  // code; the names then agree with torch.profiler's even there.
  EXPECT_EQ(demangleKernelName("f"), "float");
  EXPECT_EQ(demangleKernelName("fill"), "fill");
}

TEST(KernelNameTest, LeavesSymbolsLongerThanKinetoDemanglesMangled) {
  const std::string id(9000, 'k');
  const std::string longName = "_Z" + std::to_string(id.size()) + id + "v";
  EXPECT_EQ(demangleKernelName(longName.c_str()), longName);
  const std::string shortId(100, 'k');
  EXPECT_EQ(demangleKernelName(("_Z100" + shortId + "v").c_str()), shortId + "()");
}

TEST(KernelNameTest, MemcpyNamesCarryTheCopyAndMemoryKinds) {
  EXPECT_EQ(memcpyName(MemcpyKind::HtoD, MemoryKind::Pageable, MemoryKind::Device),
            "Memcpy HtoD (Pageable -> Device)");
  EXPECT_EQ(memcpyName(MemcpyKind::DtoH, MemoryKind::Device, MemoryKind::Pinned),
            "Memcpy DtoH (Device -> Pinned)");
  EXPECT_EQ(memcpyName(MemcpyKind::DtoD, MemoryKind::Device, MemoryKind::Device),
            "Memcpy DtoD (Device -> Device)");
  EXPECT_EQ(memcpyName(MemcpyKind::PtoP, MemoryKind::DeviceStatic, MemoryKind::ManagedStatic),
            "Memcpy PtoP (Device Static -> Managed Static)");
}

TEST(KernelNameTest, EveryCopyKindHasKinetosName) {
  const std::pair<MemcpyKind, const char*> cases[] = {
      {MemcpyKind::HtoD, "HtoD"},         {MemcpyKind::DtoH, "DtoH"},
      {MemcpyKind::HtoA, "HtoA"},         {MemcpyKind::AtoH, "AtoH"},
      {MemcpyKind::AtoA, "AtoA"},         {MemcpyKind::AtoD, "AtoD"},
      {MemcpyKind::DtoA, "DtoA"},         {MemcpyKind::DtoD, "DtoD"},
      {MemcpyKind::HtoH, "HtoH"},         {MemcpyKind::PtoP, "PtoP"},
      {MemcpyKind::Unknown, "<unknown>"}, {static_cast<MemcpyKind>(200), "<unknown>"}};
  for (const auto& [kind, name] : cases) {
    EXPECT_STREQ(memcpyKindName(kind), name) << static_cast<int>(kind);
  }
}

TEST(KernelNameTest, EveryMemoryKindHasKinetosName) {
  const std::pair<MemoryKind, const char*> cases[] = {
      {MemoryKind::Unknown, "Unknown"},
      {MemoryKind::Pageable, "Pageable"},
      {MemoryKind::Pinned, "Pinned"},
      {MemoryKind::Device, "Device"},
      {MemoryKind::Array, "Array"},
      {MemoryKind::Managed, "Managed"},
      {MemoryKind::DeviceStatic, "Device Static"},
      {MemoryKind::ManagedStatic, "Managed Static"},
      {static_cast<MemoryKind>(300), "Unrecognized"}};
  for (const auto& [kind, name] : cases) {
    EXPECT_STREQ(memoryKindName(kind), name) << static_cast<int>(kind);
  }
}

TEST(KernelNameTest, MemsetNamesCarryTheMemoryKind) {
  EXPECT_EQ(memsetName(MemoryKind::Device), "Memset (Device)");
  EXPECT_EQ(memsetName(MemoryKind::Managed), "Memset (Managed)");
  EXPECT_EQ(memsetName(static_cast<MemoryKind>(99)), "Memset (Unrecognized)");
}

}  // namespace
}  // namespace torchutil

#pragma once
// Names of GPU activity as torch.profiler (Kineto) shows them, torch-free and CUPTI-free, so
// that a kernel table compares name for name with torch.profiler's: demangled kernel names,
// "Memcpy HtoD (Pageable -> Device)", "Memset (Device)".
#include <cstdint>
#include <string>

namespace torchutil {

// CUPTI's values (CUpti_ActivityMemcpyKind, CUpti_ActivityMemoryKind) as its records carry
// them; csrc/cupti/ActivityDecoder.cpp checks at compile time that they agree with cupti.h.
enum class MemcpyKind : uint8_t {
  Unknown = 0,
  HtoD = 1,
  DtoH = 2,
  HtoA = 3,
  AtoH = 4,
  AtoA = 5,
  AtoD = 6,
  DtoA = 7,
  DtoD = 8,
  HtoH = 9,
  PtoP = 10
};
enum class MemoryKind : uint16_t {
  Unknown = 0,
  Pageable = 1,
  Pinned = 2,
  Device = 3,
  Array = 4,
  Managed = 5,
  DeviceStatic = 6,
  ManagedStatic = 7
};

// The demangled C++ name ("void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)"),
// or the name as given where it is not a mangled one (extern "C" kernels) or is longer than
// Kineto demangles; "" for null. Like Kineto, it demangles every name, so a one-letter name
// reads as the builtin type it encodes ("f": "float").
std::string demangleKernelName(const char* name);

// Kineto's strings: "HtoD", "Pageable", ...; "<unknown>" and "Unrecognized" for values CUPTI
// may add later.
const char* memcpyKindName(MemcpyKind kind);
const char* memoryKindName(MemoryKind kind);
// "Memcpy HtoD (Pageable -> Device)"
std::string memcpyName(MemcpyKind kind, MemoryKind src, MemoryKind dst);
// "Memset (Device)"
std::string memsetName(MemoryKind memory);

}  // namespace torchutil

#include "core/KernelName.h"

#include <cxxabi.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace torchutil {
namespace {

// Kineto leaves longer names mangled (libkineto/src/Demangle.cpp); so do we, to match it.
constexpr size_t kMaxDemangledSymbol = 8192;

struct FreeChars {
  void operator()(char* p) const noexcept { std::free(p); }
};

std::string demangleUncached(const char* name) {
  if (std::strlen(name) > kMaxDemangledSymbol) {
    return name;
  }
  int status = 0;
  std::unique_ptr<char, FreeChars> demangled(abi::__cxa_demangle(name, nullptr, nullptr, &status));
  return status == 0 && demangled != nullptr ? std::string(demangled.get()) : std::string(name);
}

}  // namespace

std::string demangleKernelName(const char* name) {
  if (name == nullptr) {
    return "";
  }
  // A forward launches the same few hundred kernels every time, and demangling a long template
  // name costs tens of microseconds: each name is demangled once per process.
  static std::mutex mutex;
  static std::unordered_map<std::string, std::string> cache;
  std::string raw(name);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(raw);
    if (it != cache.end()) {
      return it->second;
    }
  }
  std::string shown = demangleUncached(name);
  std::lock_guard<std::mutex> lock(mutex);
  return cache.emplace(std::move(raw), std::move(shown)).first->second;
}

const char* memcpyKindName(MemcpyKind kind) {
  switch (kind) {
    case MemcpyKind::HtoD: return "HtoD";
    case MemcpyKind::DtoH: return "DtoH";
    case MemcpyKind::HtoA: return "HtoA";
    case MemcpyKind::AtoH: return "AtoH";
    case MemcpyKind::AtoA: return "AtoA";
    case MemcpyKind::AtoD: return "AtoD";
    case MemcpyKind::DtoA: return "DtoA";
    case MemcpyKind::DtoD: return "DtoD";
    case MemcpyKind::HtoH: return "HtoH";
    case MemcpyKind::PtoP: return "PtoP";
    case MemcpyKind::Unknown: break;
  }
  return "<unknown>";
}

const char* memoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Unknown: return "Unknown";
    case MemoryKind::Pageable: return "Pageable";
    case MemoryKind::Pinned: return "Pinned";
    case MemoryKind::Device: return "Device";
    case MemoryKind::Array: return "Array";
    case MemoryKind::Managed: return "Managed";
    case MemoryKind::DeviceStatic: return "Device Static";
    case MemoryKind::ManagedStatic: return "Managed Static";
  }
  return "Unrecognized";
}

std::string memcpyName(MemcpyKind kind, MemoryKind src, MemoryKind dst) {
  return std::string("Memcpy ") + memcpyKindName(kind) + " (" + memoryKindName(src) + " -> " +
         memoryKindName(dst) + ")";
}

std::string memsetName(MemoryKind memory) {
  return std::string("Memset (") + memoryKindName(memory) + ")";
}

}  // namespace torchutil

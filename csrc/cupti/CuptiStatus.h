#pragma once
// Every check of a CUPTI call, in one place: the one sentence a failed call becomes (what a
// refused permission, an unsupported GPU or another profiler means, then the call and CUPTI's own
// text: core's explainFailure), and one macro family around it, by what a failure does to the
// caller. Built only with TORCHUTIL_WITH_CUPTI; torch-free. The CUDA runtime calls of the tracer
// (its markers and capture queries) are checked the same way, by the TORCHUTIL_CUDA_ family below.
//
//   TORCHUTIL_CUPTI_CHECK(call, why)  sets *why and returns false from the enclosing function:
//                                     set-up and reads, where a failure is a sentence in a status.
//   TORCHUTIL_CUPTI_THROW(call)       throws std::runtime_error: a running trace that fails.
//   TORCHUTIL_CUPTI_WARN(call)        warns once per call site and goes on: per-op calls and
//                                     teardown, where a failure must not end the profile (or
//                                     escape a destructor).
#include <cuda_runtime_api.h>
#include <cupti.h>

#include <atomic>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "core/HardwareBackends.h"

namespace torchutil::cupti {

// A CUPTI parameter struct: zeroed, with its size set (as every CUPTI call requires).
template <class Params>
Params params(size_t structSize) {
  Params p{};
  p.structSize = structSize;
  return p;
}

// What a CUPTI result means for the user, beyond its own text (a header function, so that the
// tests of tests/cpp/cupti check it without libcupti).
inline HwFailure failureKind(CUptiResult status) {
  switch (status) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES: return HwFailure::NoPermission;
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
    case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_INVALID_CHIP_NAME:
    case CUPTI_ERROR_API_NOT_IMPLEMENTED: return HwFailure::NotSupported;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
    case CUPTI_ERROR_HARDWARE_BUSY:
    case CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED: return HwFailure::OtherProfiler;
    default: return HwFailure::Other;
  }
}

// What a failed CUPTI call means for the user, with the call named and CUPTI's text.
std::string failure(const char* call, CUptiResult status);

// Where TORCHUTIL_CUPTI_WARN's warnings go: stderr, until the torch layer sets its own (Python's
// warnings, through TORCH_WARN).
using WarningSink = void (*)(const std::string& message);
void setWarningSink(WarningSink sink);
void warn(const std::string& message);

// A failed CUDA runtime call: "<call> failed (<CUDA's text>)".
std::string cudaFailure(const char* call, cudaError_t error);

}  // namespace torchutil::cupti

// The family's root: runs the statements after `call` when it fails, with status_ its result.
#define TORCHUTIL_CUPTI_ON_FAILURE(call, ...) \
  do {                                        \
    const CUptiResult status_ = (call);       \
    if (status_ != CUPTI_SUCCESS) {           \
      __VA_ARGS__;                            \
    }                                         \
  } while (0)

#define TORCHUTIL_CUPTI_CHECK(call, why)                                                 \
  TORCHUTIL_CUPTI_ON_FAILURE(call, *(why) = ::torchutil::cupti::failure(#call, status_); \
                             return false)

#define TORCHUTIL_CUPTI_THROW(call) \
  TORCHUTIL_CUPTI_ON_FAILURE(       \
      call, throw std::runtime_error("torchutil: " + ::torchutil::cupti::failure(#call, status_)))

// warned_: one per expansion, so once per call site.
#define TORCHUTIL_CUPTI_WARN(call)                                                             \
  TORCHUTIL_CUPTI_ON_FAILURE(                                                                  \
      call, static std::atomic<bool> warned_{false}; if (!warned_.exchange(true)) {            \
        ::torchutil::cupti::warn("torchutil: " + ::torchutil::cupti::failure(#call, status_)); \
      })

// ---- CUDA runtime calls ----
// The family's root: runs the statements after `call` when it fails, with error_ its result, once
// the error is cleared (cudaGetLastError), so that torch does not report it later.
#define TORCHUTIL_CUDA_ON_FAILURE(call, ...) \
  do {                                       \
    const cudaError_t error_ = (call);       \
    if (error_ != cudaSuccess) {             \
      (void)cudaGetLastError();              \
      __VA_ARGS__;                           \
    }                                        \
  } while (0)

//   TORCHUTIL_CUDA_CHECK(call, why)          sets *why and returns false (set-up).
//   TORCHUTIL_CUDA_WARN(call, consequence)   whether it succeeded; a failure warns once per call
//                                            site, saying what it costs (a per-op call).
//   TORCHUTIL_CUDA_OK(call)                  whether it succeeded (a query whose failure the
//                                            caller records as an incomplete answer).
#define TORCHUTIL_CUDA_CHECK(call, why)                                                    \
  TORCHUTIL_CUDA_ON_FAILURE(call, *(why) = ::torchutil::cupti::cudaFailure(#call, error_); \
                            return false)

#define TORCHUTIL_CUDA_WARN(call, consequence)                                        \
  ([&]() -> bool {                                                                    \
    TORCHUTIL_CUDA_ON_FAILURE(                                                        \
        call, static std::atomic<bool> warned_{false}; if (!warned_.exchange(true)) { \
          ::torchutil::cupti::warn(                                                   \
              "torchutil: " + ::torchutil::cupti::cudaFailure(#call, error_) + "; " + \
              (consequence));                                                         \
        } return false);                                                              \
    return true;                                                                      \
  }())

#define TORCHUTIL_CUDA_OK(call)                    \
  ([&]() -> bool {                                 \
    TORCHUTIL_CUDA_ON_FAILURE(call, return false); \
    return true;                                   \
  }())

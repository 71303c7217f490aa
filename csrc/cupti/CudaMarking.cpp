#include "cupti/CudaMarking.h"

#include <cuda_runtime_api.h>

#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/KernelName.h"
#include "cupti/CuptiStatus.h"

namespace torchutil::cupti {
namespace {

struct MarkerResources {
  cudaStream_t stream = nullptr;
  void* scratch = nullptr;
};

bool markerResources(int device, MarkerResources* out, std::string* why) {
  static std::mutex mutex;
  static std::vector<std::pair<int, MarkerResources>> made;
  std::lock_guard<std::mutex> lock(mutex);
  for (const auto& [d, r] : made) {
    if (d == device) {
      *out = r;
      return true;
    }
  }
  MarkerResources r;
  TORCHUTIL_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking), why);
  TORCHUTIL_CUDA_ON_FAILURE(cudaMalloc(&r.scratch, 1), cudaStreamDestroy(r.stream);
                            *why = cudaFailure("cudaMalloc(&r.scratch, 1)", error_); return false);
  made.emplace_back(device, r);
  *out = r;
  return true;
}

// A kernel function's demangled name, asked of CUDA once per function (a capture lists a few
// hundred kernel nodes of a few dozen functions); nullptr when CUDA gives none.
const std::string* kernelFunctionName(const void* func) {
  static std::mutex mutex;
  static std::unordered_map<const void*, std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = names.find(func); it != names.end()) {
    return &it->second;
  }
  const char* name = nullptr;
  if (!TORCHUTIL_CUDA_OK(cudaFuncGetName(&name, func)) || name == nullptr) {
    return nullptr;
  }
  return &names.emplace(func, demangleKernelName(name)).first->second;
}

CapturedNode capturedNode(cudaGraphNode_t node, bool* complete) {
  CapturedNode n;
  cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
  if (!TORCHUTIL_CUDA_OK(cudaGraphNodeGetType(node, &type))) {
    *complete = false;
  }
  n.runs = type == cudaGraphNodeTypeKernel || type == cudaGraphNodeTypeMemcpy ||
           type == cudaGraphNodeTypeMemset;
  n.kind = type == cudaGraphNodeTypeMemcpy   ? KernelRecord::Kind::Memcpy
           : type == cudaGraphNodeTypeMemset ? KernelRecord::Kind::Memset
                                             : KernelRecord::Kind::Kernel;
  cudaKernelNodeParams params{};
  const std::string* name = nullptr;
  // A kernel launched through the runtime names itself; one launched through the driver (a
  // library's) may not: then any kernel name matches it (attributeByPosition).
  if (type == cudaGraphNodeTypeKernel &&
      TORCHUTIL_CUDA_OK(cudaGraphKernelNodeGetParams(node, &params)) &&
      (name = kernelFunctionName(params.func)) != nullptr) {
    n.name = *name;
  }
  return n;
}

}  // namespace

bool CudaMarking::useMarkerStream(int* device, void** stream, std::string* why) {
  TORCHUTIL_CUDA_CHECK(cudaGetDevice(device), why);
  MarkerResources r;
  if (!markerResources(*device, &r, why)) {
    *why =
        "the op markers' stream could not be made on cuda:" + std::to_string(*device) + ": " + *why;
    return false;
  }
  stream_ = r.stream;
  scratch_ = r.scratch;
  *stream = r.stream;
  return true;
}

bool CudaMarking::issueMarker() {
  return TORCHUTIL_CUDA_WARN(cudaMemsetAsync(scratch_, 0, 1, static_cast<cudaStream_t>(stream_)),
                             "an op marker was not issued: the kernels of that op may be "
                             "attributed to the op before it");
}

void* CudaMarking::capturingGraph(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  if (!TORCHUTIL_CUDA_OK(
          cudaStreamGetCaptureInfo(static_cast<cudaStream_t>(stream), &status, nullptr, &graph)) ||
      status != cudaStreamCaptureStatusActive) {
    return nullptr;
  }
  return graph;
}

bool CudaMarking::nodeCount(void* graph, size_t* count) {
  return TORCHUTIL_CUDA_OK(cudaGraphGetNodes(static_cast<cudaGraph_t>(graph), nullptr, count));
}

bool CudaMarking::nodes(void* graph, std::vector<CapturedNode>* out) {
  const auto g = static_cast<cudaGraph_t>(graph);
  size_t count = 0;
  if (!TORCHUTIL_CUDA_OK(cudaGraphGetNodes(g, nullptr, &count))) {
    return false;
  }
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0 && !TORCHUTIL_CUDA_OK(cudaGraphGetNodes(g, nodes.data(), &count))) {
    return false;
  }
  bool complete = true;
  for (cudaGraphNode_t node : nodes) {
    out->push_back(capturedNode(node, &complete));
  }
  return complete;
}

}  // namespace torchutil::cupti

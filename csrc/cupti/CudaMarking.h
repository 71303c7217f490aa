#pragma once
// OpMarking's CUDA calls (cupti/OpMarking.h), through the CUDA runtime: markers on a stream of the
// tracer's own, and the queries of a capture's nodes. Built with TORCHUTIL_WITH_CUPTI; torch-free.
#include <cstdint>
#include <string>
#include <vector>

#include "cupti/OpMarking.h"

namespace torchutil::cupti {

class CudaMarking final : public MarkingCuda {
 public:
  // Markers go to a stream and a byte of the current device's, made once per device and kept for
  // the process (a trace per profile call would otherwise pay for both each time). False with
  // *why when CUDA cannot make them; *device: the device, *stream: the stream's handle.
  bool useMarkerStream(int* device, void** stream, std::string* why);

  bool issueMarker() override;
  void* capturingGraph(void* stream) override;
  bool nodeCount(void* graph, size_t* count) override;
  bool nodes(void* graph, std::vector<CapturedNode>* out) override;

 private:
  void* stream_ = nullptr;   // cudaStream_t
  void* scratch_ = nullptr;  // the byte the markers set
};

}  // namespace torchutil::cupti

#pragma once
// Small device helpers shared by the LibTorch layer.
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <vector>

namespace torchutil {

// Blocks until the device has finished all queued work (no-op on the CPU and meta); while a
// ThreadStreams lives on this thread, until this thread's current stream and its noted streams
// have.
void synchronizeDevice(c10::Device device);

// For threads of one process sharing the GPU (gpu_lock): CUDA refuses a device-wide
// synchronization while another thread captures (seen on an H200: "operation not permitted when
// stream is capturing"), so while one lives, synchronizeDevice waits for the thread's own
// streams instead: its current one and those given to noteThreadStream. The innermost counts.
class ThreadStreams {
 public:
  ThreadStreams();
  ~ThreadStreams();
  ThreadStreams(const ThreadStreams&) = delete;
  ThreadStreams& operator=(const ThreadStreams&) = delete;

 private:
  friend void synchronizeDevice(c10::Device device);
  friend void noteThreadStream(c10::Stream stream);
  std::vector<c10::Stream> streams_;
  ThreadStreams* outer_;
};

// A stream this thread's synchronizeDevice waits for while a ThreadStreams lives (else no-op).
void noteThreadStream(c10::Stream stream);

// The device with its index: torch.device("cuda") has none and means the current device.
c10::Device concreteDevice(c10::Device device);

}  // namespace torchutil

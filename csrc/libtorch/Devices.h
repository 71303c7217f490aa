#pragma once
// Small device helpers shared by the LibTorch layer.
#include <c10/core/Device.h>

namespace torchutil {

// Blocks until the device has finished all queued work (no-op on the CPU and meta).
void synchronizeDevice(c10::Device device);

// The device with its index: torch.device("cuda") has none and means the current device.
c10::Device concreteDevice(c10::Device device);

}  // namespace torchutil

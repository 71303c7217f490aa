#include "libtorch/Devices.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace torchutil {

void synchronizeDevice(c10::Device device) {
  if (device.is_cpu() || device.is_meta()) {
    return;
  }
  const auto* impl = c10::impl::getDeviceGuardImpl(device.type());
  impl->synchronizeDevice(device.index());
}

c10::Device concreteDevice(c10::Device device) {
  if (device.is_cpu() || device.is_meta() || device.has_index()) {
    return device;
  }
  return c10::impl::getDeviceGuardImpl(device.type())->getDevice();
}

}  // namespace torchutil

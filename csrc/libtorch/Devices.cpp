#include "libtorch/Devices.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace torchutil {
namespace {

thread_local ThreadStreams* tlsStreams = nullptr;

}  // namespace

ThreadStreams::ThreadStreams() : outer_(tlsStreams) {
  tlsStreams = this;
}

ThreadStreams::~ThreadStreams() {
  tlsStreams = outer_;
}

void noteThreadStream(c10::Stream stream) {
  if (tlsStreams != nullptr) {
    tlsStreams->streams_.push_back(stream);
  }
}

void synchronizeDevice(c10::Device device) {
  if (device.is_cpu() || device.is_meta()) {
    return;
  }
  const auto* impl = c10::impl::getDeviceGuardImpl(device.type());
  if (tlsStreams == nullptr) {
    impl->synchronizeDevice(device.index());
    return;
  }
  const c10::Device concrete = concreteDevice(device);
  impl->synchronizeStream(impl->getStream(concrete));
  for (const c10::Stream& s : tlsStreams->streams_) {
    if (s.device() == concrete) {
      impl->synchronizeStream(s);
    }
  }
}

c10::Device concreteDevice(c10::Device device) {
  if (device.is_cpu() || device.is_meta() || device.has_index()) {
    return device;
  }
  return c10::impl::getDeviceGuardImpl(device.type())->getDevice();
}

}  // namespace torchutil

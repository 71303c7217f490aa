#include "libtorch/ProfileInputs.h"

#include <c10/util/Exception.h>

#include "core/HwCounters.h"
#include "libtorch/HardwareBackends.h"
#include "libtorch/Timing.h"

namespace torchutil {

c10::Device checkInputs(const std::vector<at::Tensor>& inputs) {
  TORCH_CHECK_VALUE(!inputs.empty(), "torchutil: profile needs at least one input tensor");
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK_VALUE(inputs[i].defined(), "torchutil: input ", i, " is an undefined tensor");
    TORCH_CHECK_VALUE(inputs[i].device() == inputs[0].device(),
                      "torchutil: inputs are on different devices: input 0 on ",
                      inputs[0].device().str(), ", input ", i, " on ", inputs[i].device().str());
  }
  return inputs[0].device();
}

int64_t batchOf(const std::vector<at::Tensor>& inputs, std::optional<int64_t> batchSize) {
  if (batchSize.has_value()) {  // checked with the options (core/Options.h)
    return *batchSize;
  }
  const at::Tensor& first = inputs[0];
  TORCH_CHECK_VALUE(first.dim() >= 1,
                    "torchutil: the input needs a batch dimension, got a 0-d "
                    "tensor; pass batch_size= to say what one forward holds");
  TORCH_CHECK_VALUE(first.dim() >= 2, "torchutil: the first input is 1-D (shape ", first.sizes(),
                    "): its only dimension may be features rather than a "
                    "batch; pass batch_size= (1 for one unbatched sample)");
  if (first.size(0) == 0) {
    std::string shape;  // as Python writes a shape: (0, 4)
    for (int64_t d : first.sizes()) {
      shape += (shape.empty() ? "(" : ", ") + std::to_string(d);
    }
    TORCH_CHECK_VALUE(false, "torchutil: the input's batch dimension is empty (shape ", shape,
                      ")); profile at least one sample");
  }
  return first.size(0);
}

PlanInputs planInputsOf(const ProfileOptions& o, c10::Device device, Forward& forward) {
  PlanInputs in;
  in.device = device.is_cuda()   ? DeviceKind::Cuda
              : device.is_meta() ? DeviceKind::Meta
              : device.is_cpu()  ? DeviceKind::Cpu
                                 : DeviceKind::Other;
  in.deviceName = device.str();
  in.timing = o.timing;
  in.cudaGraphs = cudaGraphsBuilt();
  in.trace = o.trace;
  in.traceForwards = o.traceForwards;
  in.warmup = o.warmup;
  in.counters = !o.counters.empty();
  in.timeline = hw::hasSet(o.counters, hw::CounterSet::Timeline);
  in.energy = o.energy;
  in.mayFork = forward.mayFork();
  in.compiled = forward.compiled();
  in.settlingForwards = forward.settlingForwards();
  in.modulePaths = o.modulePaths;
  in.correlation = o.env.correlation;
  in.teardown = o.env.cuptiTeardown;
  return in;
}

}  // namespace torchutil

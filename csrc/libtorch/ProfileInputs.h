#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "core/ProfilePlan.h"
#include "libtorch/Forward.h"
#include "libtorch/Profile.h"

namespace torchutil {

// The device of a profile's inputs: at least one, all defined, all on one device (else a
// ValueError naming the input and the devices).
c10::Device checkInputs(const std::vector<at::Tensor>& inputs);

// The batch the figures are per: batch_size, else the first input's first dimension, which is
// a batch only when the input has more dimensions than that one (a 1-D input to a Linear(16, .)
// has 16 features, not a batch of 16).
int64_t batchOf(const std::vector<at::Tensor>& inputs, std::optional<int64_t> batchSize);

// What a profile's plan is made of: the options (with the environment's switches, read once
// with them: core/Options.h), the forward, the device and the build.
PlanInputs planInputsOf(const ProfileOptions& o, c10::Device device, Forward& forward);

}  // namespace torchutil

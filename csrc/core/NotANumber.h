#pragma once
// The NaN every torch-free unit writes for a value it does not have (the result says why).
// One definition: the build compiles csrc/core as one unity translation unit.
#include <limits>

namespace torchutil {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace torchutil

#pragma once
// The options of util::profile and util::_profile, written once: each row gives the option's
// name, schema type and default. Both ops' schemas are built from this table, their boxed
// kernels read the options from the dispatcher's stack by name, and Python reads the table
// (util::_profile_options) for torchutil.profile's defaults and its argument checks.
#include <ATen/core/ivalue.h>

#include <string>
#include <string_view>
#include <unordered_map>

#include "libtorch/Profile.h"

namespace torchutil {

struct OptionSpec {
  const char* name;
  const char* type;          // the schema's type: "int", "float?", "str[]?", ...
  const char* defaultValue;  // the schema's default, also a Python literal
  bool summaryOp;            // an option of util::profile too (else of util::_profile only)
};

inline constexpr OptionSpec kProfileOptions[] = {
    {"warmup", "int", "3", true},
    {"iters", "int", "10", true},
    {"timing", "str?", "None", true},
    {"cuda_graph", "bool", "False", true},
    {"target_ci", "float?", "None", true},
    {"max_time", "float", "2.0", true},
    {"max_iters", "int?", "None", true},
    {"peak", "str", "\"auto\"", true},
    {"peak_flops", "float?", "None", true},
    {"batch_size", "int?", "None", true},
    {"trace", "bool", "True", true},
    {"trace_forwards", "int", "1", true},
    {"counters", "str[]?", "None", true},
    {"counter_replay", "str", "\"user\"", true},
    {"gpu_lock", "str?", "None", true},
    {"energy", "bool", "False", true},
    {"energy_window", "float", "1.0", true},
    {"energy_windows", "int", "5", true},
    {"chrome_trace", "bool", "False", false},
    {"module_paths", "bool", "True", false},
};

// "name(<leading>, *, <options>) -> <returns>" over the rows of the op (summaryOp: only the
// rows util::profile takes).
std::string profileSchema(std::string_view name, std::string_view leading, std::string_view returns,
                          bool summaryOp);

// The options as the dispatcher passed them, by name.
using OptionValues = std::unordered_map<std::string, c10::IValue>;

// ProfileOptions from the options' values (every row of the op present); a bad value is a
// c10::ValueError naming the option and the value. summaryOp: util::profile, which never
// records module paths (its summary has no per-op rows) or builds a Chrome trace.
ProfileOptions profileOptions(const OptionValues& values, bool summaryOp);

}  // namespace torchutil

#pragma once
// The options of util::profile and util::_profile as the dispatcher passes them: both ops'
// schemas are built from the options table (core/Options.h), their boxed kernels read the
// options from the dispatcher's stack by name, and parseOptions checks them once.
#include <ATen/core/ivalue.h>

#include <string>
#include <string_view>
#include <unordered_map>

#include "libtorch/Profile.h"

namespace torchutil {

// "name(<leading>, *, <options>) -> <returns>" over the rows of the table (summaryOp: only the
// rows util::profile takes), each "<type> <name>=<default>".
std::string profileSchema(std::string_view name, std::string_view leading, std::string_view returns,
                          bool summaryOp);

// The options as the dispatcher passed them, by name.
using OptionValues = std::unordered_map<std::string, c10::IValue>;

// ProfileOptions from the options' values and the environment switches (read here, once per
// call: core/Options.h, readEnvSwitches); a bad value is a c10::ValueError naming the option and
// the value. summaryOp: util::profile, which never records module paths (its summary has no
// per-op rows) or builds a Chrome trace.
ProfileOptions profileOptions(const OptionValues& values, bool summaryOp);

}  // namespace torchutil

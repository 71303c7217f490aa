#pragma once
// The torch-free core reports bad values as std::invalid_argument with a sentence naming the
// value; at the torch boundary that sentence becomes a c10::ValueError (Python: ValueError).
// Every such conversion goes through this one helper.
#include <c10/util/Exception.h>

#include <stdexcept>
#include <utility>

namespace torchutil {

// Runs f() and rethrows its std::invalid_argument as c10::ValueError with the same message
// (and `context` after it, where given: " (row 3)").
template <class F>
decltype(auto) valueErrors(F&& f, const char* context = "") {
  try {
    return std::forward<F>(f)();
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what(), context);
    throw;  // not reached: the check throws
  }
}

}  // namespace torchutil

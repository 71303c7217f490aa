#pragma once
// torchutil.register_formula: a Python callable as a formula of the one registry
// (core/FormulaRegistry.h), called with the op's arguments as the built-in formulas see them.
#include <torch/python.h>

#include <string>
#include <vector>

namespace torchutil {

// Registers fn as the formula of op (a name such as "mylib::op"). fn is called as
// fn(*arguments, out_shape=...) with each tensor argument replaced by its torch.Size (a list of
// tensors by a list of them), other arguments as they are (None for what has no Python value),
// and out_shape the output's torch.Size (a tuple of them for several outputs). It returns the
// FLOPs (an int: matrix FLOPs, 2 x multiply-accumulates) or a dict with any of "matrix_flops",
// "vector_flops", "bytes"; None leaves the call unpriced (reported with the unknown ops).
// Throws ValueError naming op where it has a formula (built-in or a user's) and not replace,
// and RuntimeError while a count runs.
void registerUserFormula(const std::string& op, const pybind11::object& fn, bool replace);
// Removes op's user formula (a built-in it replaced comes back); ValueError where it has none.
void unregisterUserFormula(const std::string& op);
std::vector<std::string> userFormulaNames();

}  // namespace torchutil

#pragma once
// One registry from operator name ("aten::addmm") to the formula that prices one call of it.
// Formulas are pure functions of the op's inputs and outputs (shapes and scalars, OpArgs.h).
// The FLOP convention is in Convention.h; the registrations are in Formulas.cpp and the
// Formulas<Family>.cpp files it calls (FormulaFamilies.h).
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/OpArgs.h"

namespace torchutil {

// How an op is accounted for.
enum class OpClass : uint8_t {
  Matrix,       // counted: contractions (its FLOPs may include vector parts such as a bias)
  Vector,       // counted: arithmetic that is not a contraction
  Memory,       // counted: bytes only, no FLOPs
  Transparent,  // not counted itself (views, allocations, composite wrappers): its callees are
};

const char* opClassName(OpClass c);

struct Cost {
  int64_t matrixFlops = 0;
  int64_t vectorFlops = 0;
  // Of matrixFlops + vectorFlops, the FLOPs spent on attention scores that a causal mask
  // discards: the useful FLOPs are the rest (docs/counting.md, "Masked attention").
  int64_t maskedFlops = 0;
  // The shapes do not determine the cost (roi_align's adaptive sampling ratio depends on the
  // boxes): the call is reported as an op with no formula, never priced at 0.
  bool unpriced = false;
  // The dtype the products ran in, where it is not the first input's (a dynamically quantized
  // Linear takes float input and multiplies in int8): the row's dtype, which picks the peak.
  // A static name, or nullptr.
  const char* dtype = nullptr;
};

using Formula = Cost (*)(const Args& inputs, const Args& outputs);

struct FormulaEntry {
  std::string name;
  OpClass opClass = OpClass::Transparent;
  Formula formula = nullptr;  // null for Memory and Transparent
};

class FormulaRegistry {
 public:
  // The process-wide registry holding every formula of Formulas*.cpp.
  static const FormulaRegistry& global();

  // Throws std::invalid_argument if name is already registered, or if a counted arithmetic
  // class comes without a formula.
  void add(std::string name, OpClass opClass, Formula formula = nullptr);

  // Exact name first; then an in-place variant ("aten::relu_") falls back to its base name.
  // Namespaces that never do tensor work of their own (prim::, profiler::, util::) are
  // transparent. Returns nullptr for an op with no entry.
  const FormulaEntry* find(std::string_view name) const;

  size_t size() const { return entries_.size(); }
  std::vector<std::string> names() const;

 private:
  std::unordered_map<std::string, FormulaEntry> entries_;
  FormulaEntry transparentNamespace_{"<transparent namespace>", OpClass::Transparent, nullptr};
};

// Fills a registry with torchutil's formulas (Formulas.cpp and its families).
void registerAllFormulas(FormulaRegistry& registry);

}  // namespace torchutil

#pragma once
// One registry from operator name ("aten::addmm") to the formula that prices one call of it.
// Formulas are pure functions of the op's inputs and outputs (shapes and scalars, OpArgs.h).
// The FLOP convention is in Convention.h; the registrations are in Formulas.cpp and the
// Formulas<Family>.cpp files it calls (FormulaFamilies.h).
#include <cstdint>
#include <functional>
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
  // The bytes the call read and wrote, where its formula knows them better than the nominal
  // sizes of its tensors (a user's formula may say); -1: the nominal sizes.
  int64_t bytes = -1;
};

using Formula = Cost (*)(const Args& inputs, const Args& outputs);
// A formula given at run time (torchutil.register_formula): any callable, same convention.
using UserFormula = std::function<Cost(const Args& inputs, const Args& outputs)>;

struct FormulaEntry {
  std::string name;
  OpClass opClass = OpClass::Transparent;
  Formula formula = nullptr;  // null for Memory and Transparent, and for a user's formula
  UserFormula user;           // set for a formula registered at run time

  bool priced() const { return formula != nullptr || user != nullptr; }
  // The call's cost; nothing for an entry without a formula.
  Cost price(const Args& inputs, const Args& outputs) const {
    return formula != nullptr ? formula(inputs, outputs)
           : user != nullptr  ? user(inputs, outputs)
                              : Cost{};
  }
  // The class of a priced call's row: the entry's, but a user's formula's by what it returned
  // (matrix FLOPs: matrix; else vector FLOPs: vector; else memory, bytes only).
  OpClass rowClass(const Cost& c) const {
    if (user == nullptr) {
      return opClass;
    }
    return c.matrixFlops > 0   ? OpClass::Matrix
           : c.vectorFlops > 0 ? OpClass::Vector
                               : OpClass::Memory;
  }
};

class FormulaRegistry {
 public:
  // The process-wide registry holding every formula of Formulas*.cpp, and the users'.
  static const FormulaRegistry& global();
  // The same, to add or remove users' formulas. Counts hold pointers to its entries: the
  // torch layer changes it only while no count runs (and drops its cached lookups on a new
  // generation()).
  static FormulaRegistry& globalForUsers();

  // Throws std::invalid_argument if name is already registered, or if a counted arithmetic
  // class comes without a formula.
  void add(std::string name, OpClass opClass, Formula formula = nullptr);

  // Exact name first; then an in-place variant ("aten::relu_") falls back to its base name.
  // Namespaces that never do tensor work of their own (prim::, profiler::, util::) are
  // transparent. Returns nullptr for an op with no entry.
  const FormulaEntry* find(std::string_view name) const;

  size_t size() const { return entries_.size(); }
  std::vector<std::string> names() const;

  // A user's formula for name, counted as arithmetic (OpClass::Matrix: it covers its callees,
  // rule 1). Throws std::invalid_argument, naming the op, if name has a formula already (a
  // built-in one or a user's) unless replace is true; a replaced built-in comes back with
  // removeUser.
  void addUser(const std::string& name, UserFormula formula, bool replace = false);
  // Removes the user's formula of name (restoring a built-in it replaced). Throws
  // std::invalid_argument, naming the op, where name has no user's formula.
  void removeUser(const std::string& name);
  // The names with a user's formula, sorted.
  std::vector<std::string> userNames() const;
  // Changes whenever a user's formula is added or removed.
  uint64_t generation() const { return generation_; }

 private:
  std::unordered_map<std::string, FormulaEntry> entries_;
  std::unordered_map<std::string, FormulaEntry> replaced_;  // built-ins a user's formula replaced
  uint64_t generation_ = 0;
  FormulaEntry transparentNamespace_{"<transparent namespace>", OpClass::Transparent, nullptr, {}};
};

// Fills a registry with torchutil's formulas (Formulas.cpp and its families).
void registerAllFormulas(FormulaRegistry& registry);

}  // namespace torchutil

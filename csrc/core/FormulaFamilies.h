#pragma once
// What the formula files share: readers of an op's arguments, and each family's registration.
// One registry (FormulaRegistry.h) holds them all; registerAllFormulas (Formulas.cpp) calls
// every register*Formulas below. Internal to csrc/core/Formulas*.cpp.
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/Convention.h"
#include "core/FormulaRegistry.h"

namespace torchutil::formulas {

inline const TensorInfo* tensorAt(const Args& args, size_t i) {
  if (i < args.size() && args[i].kind == ArgKind::Tensor) {
    return &args[i].tensor;
  }
  return nullptr;
}

inline bool boolAt(const Args& args, size_t i) {
  return i < args.size() && args[i].kind == ArgKind::Bool && args[i].flag;
}

inline int64_t intAt(const Args& args, size_t i, int64_t fallback = -1) {
  return i < args.size() && args[i].kind == ArgKind::Int ? args[i].ints.front() : fallback;
}

inline bool isZero(const Args& args, size_t i) {
  return i < args.size() && (args[i].kind == ArgKind::Double || args[i].kind == ArgKind::Int) &&
         args[i].number == 0.0;
}

inline int64_t product(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) {
    p = saturatingMul(p, v[i]);
  }
  return p;
}

// A bias (the input at biasIdx) is added once per output element; when the op scales it by a
// beta (the argument at betaIdx) of 0 it is not added at all (baddbmm(..., beta=0) in GPT-2's
// attention only allocates its output).
inline int64_t biasFlops(const Args& in, int biasIdx, const TensorInfo& out, int betaIdx = -1) {
  if (biasIdx < 0 || tensorAt(in, static_cast<size_t>(biasIdx)) == nullptr ||
      (betaIdx >= 0 && isZero(in, static_cast<size_t>(betaIdx)))) {
    return 0;
  }
  return out.numel();
}

inline void addAll(FormulaRegistry& r, std::initializer_list<const char*> names, OpClass c,
                   Formula f = nullptr) {
  for (const char* n : names) {
    r.add(n, c, f);
  }
}

// Matrix products, grouped products, convolutions, recurrent layers (FormulasMatrix.cpp).
void registerMatrixFormulas(FormulaRegistry& r);
// scaled_dot_product_attention's backends and the MultiheadAttention fast path, with the
// FLOPs a causal mask discards (FormulasAttention.cpp).
void registerAttentionFormulas(FormulaRegistry& r);
// Sampling at computed points: grid_sample, torchvision's roi_align, and nms
// (FormulasSampling.cpp).
void registerSamplingFormulas(FormulaRegistry& r);
// Decompositions, solves and FFTs (FormulasLinalg.cpp).
void registerLinalgFormulas(FormulaRegistry& r);

}  // namespace torchutil::formulas

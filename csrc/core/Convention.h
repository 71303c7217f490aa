#pragma once
// The FLOP convention of torchutil, stated once.
//
// * A multiply-accumulate is two FLOPs: a product of an (m x k) and a (k x n) matrix is 2*m*k*n.
// * "Matrix" FLOPs are the multiply-accumulates of contractions that tensor cores (or a CPU's
//   GEMM units) can run: matrix products, convolutions, attention's two products. They are what
//   torch.utils.flop_counter.FlopCounterMode counts, with the same formulas.
// * "Vector" FLOPs are everything else that does arithmetic, counted per element with the
//   factors in Formulas.cpp (elementwise ops one per output element, normalizations, softmax,
//   pooling windows, reductions, bias additions). They never run on tensor cores.
// * Ops that only move data (copies, concatenation, padding) cost bytes, no FLOPs; views and
//   allocations cost nothing. Any other op is reported by name and count, never counted as 0.
// * Bytes are nominal: the sizes of every tensor an op reads plus every tensor it writes.
// * Counts are int64 and saturate: a product or sum that does not fit (a Linear on meta-device
//   shapes of 2^30 x 2^20) is held at kSaturatedCount, and the result says so
//   (CountTotals::saturated, the summary field count_saturated), never wraps around.
#include <cstdint>
#include <limits>

namespace torchutil {

inline constexpr int64_t kFlopsPerMac = 2;

inline constexpr int64_t kSaturatedCount = std::numeric_limits<int64_t>::max();

// a * b and a + b of non-negative counts, held at kSaturatedCount when they do not fit.
inline int64_t saturatingMul(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kSaturatedCount : r;
}
inline int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? kSaturatedCount : r;
}

inline int64_t macsToFlops(int64_t macs) {
  return saturatingMul(kFlopsPerMac, macs);
}

}  // namespace torchutil

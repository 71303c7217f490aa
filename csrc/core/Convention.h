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
#include <cstdint>

namespace torchutil {

inline constexpr int64_t kFlopsPerMac = 2;

inline constexpr int64_t macsToFlops(int64_t macs) {
  return kFlopsPerMac * macs;
}

}  // namespace torchutil

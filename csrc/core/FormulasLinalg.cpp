// Linear algebra and spectral formulas: the matrix decompositions and solves by their textbook
// counts (Golub & Van Loan, "Matrix Computations", 4th ed.: the leading terms, in FLOPs, of the
// algorithms LAPACK and cuSOLVER run), and FFTs by the radix-2 count. All are vector FLOPs:
// they are not the contractions FlopCounterMode counts as matrix work (docs/counting.md,
// "Decompositions and FFTs").
#include <algorithm>
#include <cmath>
#include <utility>

#include "core/FormulaFamilies.h"

namespace torchutil::formulas {
namespace {

int64_t rounded(double flops) {
  if (!(flops > 0)) {
    return 0;
  }
  return flops >= static_cast<double>(kSaturatedCount) ? kSaturatedCount
                                                       : static_cast<int64_t>(std::llround(flops));
}

// The matrices of a batch [..., m, n]: their number.
double batchOf(const TensorInfo& a) {
  return static_cast<double>(product(a.sizes)) /
         static_cast<double>(std::max<int64_t>(1, a.size(-2) * a.size(-1)));
}

// The input matrix (batch) [..., m, n], or nullptr.
const TensorInfo* matrixAt(const Args& in) {
  const TensorInfo* a = tensorAt(in, 0);
  return a != nullptr && a->dim() >= 2 ? a : nullptr;
}

// (max(m, n), min(m, n)) of a matrix [..., m, n].
std::pair<double, double> longAndShort(const TensorInfo& a) {
  return {static_cast<double>(std::max(a.size(-2), a.size(-1))),
          static_cast<double>(std::min(a.size(-2), a.size(-1)))};
}

// Householder reflections of an m x n matrix applied to q columns (k = min(m, n) reflections):
// sum over j < k of 4(m - j)(q - j) = 4(m·q·k - (m + q)·k²/2 + k³/3). With q = n it is the QR
// factorization's R (2mn² - 2n³/3 for m >= n), with q the columns of Q it is Q's accumulation
// (thin Q: 2mn² - 2n³/3; complete Q: 4(m²n - mn² + n³/3)).
double householder(double m, double q, double k) {
  return 4 * (m * q * k - (m + q) * k * k / 2 + k * k * k / 3);
}

// ---- factorizations -----------------------------------------------------------------------

// linalg_lu_factor_ex(A [..., m, n], pivot, check_errors): Gaussian elimination with partial
// pivoting, p·q² - q³/3 with p = max(m, n), q = min(m, n) (2n³/3 square).
Cost lu(const Args& in, const Args&) {
  const TensorInfo* a = matrixAt(in);
  if (a == nullptr) {
    return {};
  }
  const auto [p, q] = longAndShort(*a);
  return {0, rounded(batchOf(*a) * (p * q * q - q * q * q / 3))};
}

// linalg_cholesky_ex(A [..., n, n], upper, check_errors): n³/3.
Cost cholesky(const Args& in, const Args&) {
  const TensorInfo* a = tensorAt(in, 0);
  if (a == nullptr || a->dim() < 2) {
    return {};
  }
  const double n = static_cast<double>(a->size(-1));
  return {0, rounded(batchOf(*a) * n * n * n / 3)};
}

// linalg_qr(A [..., m, n], mode) -> (Q, R): Householder QR, R's reflections and Q's
// accumulation over Q's columns (mode "r" returns an empty Q: none).
Cost qr(const Args& in, const Args& out) {
  const TensorInfo* a = tensorAt(in, 0);
  const TensorInfo* q = tensorAt(out, 0);
  if (a == nullptr || q == nullptr || a->dim() < 2) {
    return {};
  }
  const double m = static_cast<double>(a->size(-2));
  const double n = static_cast<double>(a->size(-1));
  const double k = std::min(m, n);
  double flops = householder(m, n, k);
  if (q->numel() > 0 && q->dim() >= 2) {
    flops += householder(m, static_cast<double>(q->size(-1)), k);
  }
  return {0, rounded(batchOf(*a) * flops)};
}

// _linalg_eigh(A [..., n, n], UPLO, compute_v): the symmetric QR algorithm after a
// tridiagonal reduction, 4n³/3 for the eigenvalues and about 9n³ with the eigenvectors.
constexpr size_t kEighComputeV = 2;
Cost eigh(const Args& in, const Args&) {
  const TensorInfo* a = tensorAt(in, 0);
  if (a == nullptr || a->dim() < 2) {
    return {};
  }
  const double n = static_cast<double>(a->size(-1));
  const bool vectors = in.size() <= kEighComputeV || boolAt(in, kEighComputeV);
  return {0, rounded(batchOf(*a) * (vectors ? 9 * n * n * n : 4 * n * n * n / 3))};
}

// linalg_eig(A [..., n, n]) and linalg_eigvals: the nonsymmetric QR algorithm after a
// Hessenberg reduction, about 25n³ with the eigenvectors, 10n³ for the eigenvalues alone.
template <int PerCube>
Cost eig(const Args& in, const Args&) {
  const TensorInfo* a = matrixAt(in);
  if (a == nullptr) {
    return {};
  }
  const double n = static_cast<double>(a->size(-1));
  return {0, rounded(batchOf(*a) * PerCube * n * n * n)};
}

// _linalg_svd(A [..., m, n], full_matrices, compute_uv, driver): the Golub-Kahan-Reinsch SVD,
// with p = max(m, n), q = min(m, n): the singular values 4pq² - 4q³/3; with the thin U and V
// 14pq² + 8q³; with the full U and V 4p²q + 8pq² + 9q³.
constexpr size_t kSvdFullMatrices = 1;
constexpr size_t kSvdComputeUv = 2;
Cost svd(const Args& in, const Args&) {
  const TensorInfo* a = matrixAt(in);
  if (a == nullptr) {
    return {};
  }
  const auto [p, q] = longAndShort(*a);
  const bool uv = in.size() <= kSvdComputeUv || boolAt(in, kSvdComputeUv);
  double flops = 4 * p * q * q - 4 * q * q * q / 3;
  if (uv) {
    flops = boolAt(in, kSvdFullMatrices) ? 4 * p * p * q + 8 * p * q * q + 9 * q * q * q
                                         : 14 * p * q * q + 8 * q * q * q;
  }
  return {0, rounded(batchOf(*a) * flops)};
}

// ---- solves -------------------------------------------------------------------------------
// A triangular solve with an n x n matrix costs n² FLOPs per right-hand side: n·(the output's
// elements), Solves is the number of triangular solves (2 after LU or Cholesky: L, then U or
// Lᴴ). The matrix is the input at MatrixIdx.
template <size_t MatrixIdx, int Solves>
Cost triangularSolves(const Args& in, const Args& out) {
  const TensorInfo* a = tensorAt(in, MatrixIdx);
  const TensorInfo* o = firstTensor(out);
  if (a == nullptr || o == nullptr || a->dim() < 2) {
    return {};
  }
  return {0, saturatingMul(saturatingMul(Solves, a->size(-1)), o->numel())};
}

// ---- FFTs ---------------------------------------------------------------------------------
// A complex transform of N points: 5·N·log2 N real FLOPs (the radix-2 count: N/2·log2 N
// butterflies of a complex multiply, 6, and two complex adds, 4); a real one (r2c, c2r) half of
// that, 2.5·N·log2 N. A transform over several dimensions has N their product (the one-
// dimensional transforms along each sum to it). Normalization (by 1/N or 1/sqrt N) multiplies
// each output element by a real: 2 FLOPs per complex element, 1 per real one.
//   _fft_c2c(self, dim, normalization, forward)
//   _fft_r2c(self, dim, normalization, onesided)
//   _fft_c2r(self, dim, normalization, last_dim_size)
// signal: the tensor whose sizes along dim are the transform's (the real side for r2c, c2r).
double transformPoints(const TensorInfo& signal, const std::vector<int64_t>& dims) {
  double n = 1;
  for (int64_t d : dims) {
    n *= static_cast<double>(signal.size(d));
  }
  return n;
}

enum class Fft { C2C, R2C, C2R };
template <Fft Kind>
Cost fft(const Args& in, const Args& out) {
  const TensorInfo* x = tensorAt(in, 0);
  const TensorInfo* o = firstTensor(out);
  if (x == nullptr || o == nullptr || in.size() < 3 || in[1].kind != ArgKind::IntList) {
    return {};
  }
  const TensorInfo& signal = Kind == Fft::C2R ? *o : *x;
  const double n = transformPoints(signal, in[1].ints);
  if (n < 1) {
    return {};
  }
  const double transforms = static_cast<double>(signal.numel()) / n;
  const double perPoint = Kind == Fft::C2C ? 5.0 : 2.5;
  double flops = transforms * perPoint * n * std::log2(n);
  if (intAt(in, 2, 0) != 0) {
    flops += static_cast<double>(o->numel()) * (Kind == Fft::C2R ? 1 : 2);
  }
  return {0, rounded(flops)};
}

}  // namespace

void registerLinalgFormulas(FormulaRegistry& r) {
  using C = OpClass;
  r.add("aten::linalg_lu_factor_ex", C::Vector, &lu);
  r.add("aten::linalg_cholesky_ex", C::Vector, &cholesky);
  r.add("aten::linalg_qr", C::Vector, &qr);
  r.add("aten::_linalg_eigh", C::Vector, &eigh);
  r.add("aten::_linalg_svd", C::Vector, &svd);
  r.add("aten::linalg_eig", C::Vector, &eig<25>);
  r.add("aten::linalg_eigvals", C::Vector, &eig<10>);
  // linalg_lu_solve(LU, pivots, B, left, adjoint): L, then U.
  r.add("aten::linalg_lu_solve", C::Vector, &triangularSolves</*MatrixIdx=*/0, 2>);
  // linalg_solve_triangular(A, B, upper, left, unitriangular)
  r.add("aten::linalg_solve_triangular", C::Vector, &triangularSolves</*MatrixIdx=*/0, 1>);
  // cholesky_solve(B, L, upper) and its helper: L, then Lᴴ.
  addAll(r, {"aten::cholesky_solve", "aten::_cholesky_solve_helper"}, C::Vector,
         &triangularSolves</*MatrixIdx=*/1, 2>);
  r.add("aten::_fft_c2c", C::Vector, &fft<Fft::C2C>);
  r.add("aten::_fft_r2c", C::Vector, &fft<Fft::R2C>);
  r.add("aten::_fft_c2r", C::Vector, &fft<Fft::C2R>);
}

}  // namespace torchutil::formulas

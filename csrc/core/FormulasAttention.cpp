// Attention formulas: every backend of scaled_dot_product_attention and the
// nn.MultiheadAttention fast path.
//
// Nominal FLOPs (matrixFlops, vectorFlops) price the full score matrix, as FlopCounterMode
// does: QK^T and PV are 2*B*H*Lq*Lk*E + 2*B*H*Lq*Lk*Ev matrix FLOPs, the softmax 5 per score.
// Of those, Cost::maskedFlops are the FLOPs of the scores a causal (or sliding-window) mask
// discards, known from the op's flags and shapes alone; useful FLOPs are the rest. A mask
// passed as a tensor (attn_mask, attn_bias) is data: it is not read, and discards nothing here.
#include <algorithm>

#include "core/FormulaFamilies.h"

namespace torchutil::formulas {
namespace {

// Which keys a query keeps: key j for query i when i + offset - left <= j <= i + offset + right
// (a band around a diagonal). A side of kUnbounded has no limit.
constexpr int64_t kUnbounded = -1;
struct Band {
  bool on = false;  // off: every score is kept
  int64_t offset = 0;
  int64_t left = kUnbounded;
  int64_t right = kUnbounded;
};

// A causal mask's diagonal starts at the top-left corner of the Lq x Lk scores (PyTorch's
// is_causal: query i keeps keys 0..i) or ends at the bottom-right one (flash-attn's: the last
// query keeps every key, as a query appended to a KV cache does).
enum class Causal : uint8_t { TopLeft, BottomRight };

Band causalBand(Causal c, int64_t lq, int64_t lk) {
  return {true, c == Causal::TopLeft ? 0 : lk - lq, kUnbounded, 0};
}

// sum over i in [0, n) of clamp(i + c, 0, m), in closed form.
int64_t clampedRampSum(int64_t n, int64_t c, int64_t m) {
  if (n <= 0 || m <= 0) {
    return 0;
  }
  const int64_t last = c + n - 1;  // the ramp runs over the values c .. last
  int64_t sum = 0;
  const int64_t lo = std::max<int64_t>(c, 1), hi = std::min(last, m);
  if (lo <= hi) {  // the values inside (0, m]: an arithmetic series; one factor is even
    const int64_t a = lo + hi, b = hi - lo + 1;
    sum = a % 2 == 0 ? saturatingMul(a / 2, b) : saturatingMul(a, b / 2);
  }
  const int64_t above = last - std::max(c, m + 1) + 1;  // the values past m count m each
  return above > 0 ? saturatingAdd(sum, saturatingMul(above, m)) : sum;
}

// Scores of an lq x lk attention that the band keeps. Row i keeps the keys from
// clamp(i + offset - left, 0, lk) up to (not including) clamp(i + offset + right + 1, 0, lk);
// both ends rise with i and the end is never below the start, so the rows' sum is the
// difference of two clamped ramps.
int64_t keptScores(int64_t lq, int64_t lk, const Band& b) {
  const int64_t ends = b.right == kUnbounded ? saturatingMul(lq, lk)
                                             : clampedRampSum(lq, b.offset + b.right + 1, lk);
  const int64_t starts = b.left == kUnbounded ? 0 : clampedRampSum(lq, b.offset - b.left, lk);
  return ends - starts;
}

struct AttentionDims {
  int64_t bh = 0, lq = 0, lk = 0, e = 0, ev = 0;
  Band band;
};

// Per score: E MACs for QK^T, Ev for PV, and 5 softmax FLOPs.
Cost attentionCost(const AttentionDims& d) {
  const int64_t scores = saturatingMul(saturatingMul(d.bh, d.lq), d.lk);
  Cost c{saturatingAdd(macsToFlops(saturatingMul(scores, d.e)),
                       macsToFlops(saturatingMul(scores, d.ev))),
         saturatingMul(5, scores)};
  if (d.band.on && d.lq > 0 && d.lk > 0) {
    const int64_t discarded =
        saturatingMul(d.bh, saturatingMul(d.lq, d.lk) - keptScores(d.lq, d.lk, d.band));
    const int64_t perScore =
        saturatingAdd(saturatingAdd(macsToFlops(d.e), macsToFlops(d.ev)), /*softmax=*/5);
    c.maskedFlops = saturatingMul(discarded, perScore);
  }
  return c;
}

// Query [..., Lq, E], key [..., Lk, E], value [..., Lk, Ev]; leading dims are batch and heads
// (query heads: with grouped-query attention every query head attends over all keys). The
// is_causal flag at CausalIdx, aligned as the backend aligns it.
template <int CausalIdx, Causal Align>
Cost attentionBHLE(const Args& in, const Args&) {
  const TensorInfo* q = tensorAt(in, 0);
  const TensorInfo* k = tensorAt(in, 1);
  const TensorInfo* v = tensorAt(in, 2);
  if (q == nullptr || k == nullptr || v == nullptr || q->dim() < 2 || k->dim() < 2) {
    return {};
  }
  AttentionDims d;
  d.bh = product(std::vector<int64_t>(q->sizes.begin(), q->sizes.end() - 2));
  d.lq = q->size(-2);
  d.e = q->size(-1);
  d.lk = k->size(-2);
  d.ev = v->size(-1);
  if (CausalIdx >= 0 && boolAt(in, static_cast<size_t>(CausalIdx))) {
    d.band = causalBand(Align, d.lq, d.lk);
  }
  return attentionCost(d);
}

// _flash_attention_forward / _efficient_attention_forward: [B, L, H, E]. With cumulative
// sequence lengths (variable-length batches: argument CuSeqQ, the maximum lengths two and three
// after it) q is [total, H, E] (flash) or [1, total, H, E] (efficient); the count then uses the
// maximum lengths and is an upper bound.
AttentionDims attentionBLHE(const Args& in, size_t cuSeqQ) {
  const TensorInfo* q = tensorAt(in, 0);
  const TensorInfo* k = tensorAt(in, 1);
  const TensorInfo* v = tensorAt(in, 2);
  AttentionDims d;
  if (q == nullptr || k == nullptr || v == nullptr) {
    return d;
  }
  const TensorInfo* cuSeq = tensorAt(in, cuSeqQ);
  if (q->dim() == 4 && cuSeq == nullptr) {
    d.bh = q->size(0) * q->size(2);
    d.lq = q->size(1);
    d.e = q->size(3);
    d.lk = k->size(1);
    d.ev = v->size(3);
  } else if (q->dim() == 3 || q->dim() == 4) {
    const int64_t batch = cuSeq != nullptr ? cuSeq->numel() - 1 : 1;
    d.bh = batch * q->size(-2);
    d.lq = intAt(in, cuSeqQ + 2, /*fallback=*/0);
    d.lk = intAt(in, cuSeqQ + 3, /*fallback=*/0);
    d.e = q->size(-1);
    d.ev = v->size(-1);
  }
  return d;
}

// _flash_attention_forward(q, k, v, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
// return_debug_mask, *, scale, window_size_left, window_size_right, ...): flash-attn's masks,
// aligned bottom-right; a window keeps window_size_left keys before the diagonal and
// window_size_right after it (causal: none after), -1 or none for no limit.
Cost flashAttentionForward(const Args& in, const Args&) {
  AttentionDims d = attentionBLHE(in, /*cuSeqQ=*/3);
  const int64_t left = std::max<int64_t>(intAt(in, 11), kUnbounded);
  const int64_t right = boolAt(in, 8) ? 0 : std::max<int64_t>(intAt(in, 12), kUnbounded);
  if (left != kUnbounded || right != kUnbounded) {
    d.band = {true, d.lk - d.lq, left, right};
  }
  return attentionCost(d);
}

// _efficient_attention_forward(q, k, v, bias, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
// max_seqlen_k, dropout_p, custom_mask_type, ...): custom_mask_type 1 is causal from the
// top-left, 2 from the bottom-right (torch.nn.attention.bias.CausalVariant).
Cost efficientAttentionForward(const Args& in, const Args&) {
  AttentionDims d = attentionBLHE(in, /*cuSeqQ=*/4);
  const int64_t mask = intAt(in, 9, /*fallback=*/0);
  if (mask == 1 || mask == 2) {
    d.band = causalBand(mask == 1 ? Causal::TopLeft : Causal::BottomRight, d.lq, d.lk);
  }
  return attentionCost(d);
}

// _native_multi_head_attention(query [B,L,D], key [B,S,D], value, embed_dim, num_head,
// qkv_weight, qkv_bias, proj_weight, proj_bias, ...): the nn.MultiheadAttention fast path.
Cost nativeMultiHeadAttention(const Args& in, const Args&) {
  const TensorInfo* q = tensorAt(in, 0);
  const TensorInfo* k = tensorAt(in, 1);
  if (q == nullptr || k == nullptr || q->dim() != 3 || k->dim() != 3 || in.size() < 5 ||
      in[4].kind != ArgKind::Int) {
    return {};
  }
  const int64_t b = q->size(0), l = q->size(1), dModel = q->size(2), s = k->size(1);
  const int64_t heads = in[4].ints.front();
  const int64_t projections = macsToFlops(b * l * dModel * dModel)        // q
                              + 2 * macsToFlops(b * s * dModel * dModel)  // k, v
                              + macsToFlops(b * l * dModel * dModel);     // out
  const int64_t biases = 2 * b * l * dModel + 2 * b * s * dModel;
  AttentionDims d{b * heads, l, s, dModel / heads, dModel / heads, Band{}};
  Cost c = attentionCost(d);
  c.matrixFlops += projections;
  c.vectorFlops += biases;
  return c;
}

// torchutil::flex_attention(query, key, value, computed_blocks, total_blocks): FlexAttention's
// higher-order op, run inside this op by the eager count (torchutil/_eager.py). Nominal: the
// full score matrix, as for SDPA (score_mod and mask_mod are user code, run elementwise and
// priced by nothing here). Its BlockMask computes computed_blocks of the total_blocks
// (query block, key block) pairs (full and partial blocks alike: a partial block computes all
// its scores, then masks them); the FLOPs of the others are masked.
Cost flexAttention(const Args& in, const Args& out) {
  Cost c = attentionBHLE</*CausalIdx=*/-1, Causal::TopLeft>(in, out);
  const int64_t computed = intAt(in, 3), total = intAt(in, 4);
  if (total > 0 && computed >= 0 && computed <= total) {
    const double skipped = static_cast<double>(total - computed) / static_cast<double>(total);
    c.maskedFlops = static_cast<int64_t>(
        static_cast<double>(saturatingAdd(c.matrixFlops, c.vectorFlops)) * skipped);
  }
  return c;
}

}  // namespace

void registerAttentionFormulas(FormulaRegistry& r) {
  using C = OpClass;
  // Every backend of scaled_dot_product_attention, by where its is_causal flag is. PyTorch's
  // is_causal is aligned top-left; the CUDA flash kernel's own is bottom-right (sdpa sends it no
  // causal call with Lq != Lk; torch.nn.attention.bias.causal_lower_right does).
  addAll(r,
         {"aten::scaled_dot_product_attention", "aten::_scaled_dot_product_attention_math",
          "aten::_scaled_dot_product_attention_math_for_mps",
          "aten::_scaled_dot_product_fused_attention_overrideable"},
         C::Matrix, &attentionBHLE</*CausalIdx=*/5, Causal::TopLeft>);
  r.add("aten::_scaled_dot_product_flash_attention_for_cpu", C::Matrix,
        &attentionBHLE</*CausalIdx=*/4, Causal::TopLeft>);
  r.add("aten::_scaled_dot_product_flash_attention", C::Matrix,
        &attentionBHLE</*CausalIdx=*/4, Causal::BottomRight>);
  addAll(r,
         {"aten::_scaled_dot_product_efficient_attention",
          "aten::_scaled_dot_product_cudnn_attention"},
         C::Matrix, &attentionBHLE</*CausalIdx=*/6, Causal::TopLeft>);
  r.add("aten::_flash_attention_forward", C::Matrix, &flashAttentionForward);
  r.add("aten::_efficient_attention_forward", C::Matrix, &efficientAttentionForward);
  r.add("aten::_native_multi_head_attention", C::Matrix, &nativeMultiHeadAttention);
  r.add("torchutil::flex_attention", C::Matrix, &flexAttention);
}

}  // namespace torchutil::formulas

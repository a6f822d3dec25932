// GET's pair MLPs (attend_pairs.cpp) for rh = nr = 8 on 16-float vectors, two heads per vector.
//
// A pair's rows [h, 3rh] (sender terms, pre-activations, activations, ...) are read and written as they lie in
// memory, 16 floats at a time: a pair of heads (A, B) is three vectors, k = 0: (A block 0 | A block 1),
// k = 1: (A block 2 | B block 0), k = 2: (B block 1 | B block 2), where block b holds the rh features of the
// attention (b = 0), message (1) or coordinate (2) MLP. Element-wise steps (SiLU, its slope) then run on full
// vectors; a product with a block's weights runs on both halves at once against a weight vector whose halves
// are the two blocks' weights (WideWeights, made once per call), with each half's input feature spread over
// its 8 lanes by one permutation (spread). Weight gradients are summed in the same paired layout
// (WideGrads) and unfolded into the caller's layouts once per call.
//
// Compiled only where the processor has 512-bit vectors (__AVX512F__); elsewhere attend_pairs.cpp keeps its
// 8-float loops.
#pragma once

#if defined(__AVX512F__)
#define GEOMOL_PAIR_HEADS_WIDE 1

#include <cstdint>

#include "native_math.h"

namespace geomol_native {
namespace {  // internal to attend_pairs.cpp, its one includer: calls stay direct (no interposable symbols)

using v16 = vec<16>;
using lanes16 = Lanes<16>::integers;

constexpr int kLow[3] = {0, 2, 1};   // the block in the low half of vector k of a head pair
constexpr int kHigh[3] = {1, 0, 2};  // ... and in its high half

// [x[m] in lanes 0-7, x[8 + m] in lanes 8-15]: each half's feature m over the half.
inline v16 spread(v16 x, int m) {
  return __builtin_shuffle(x, lanes16{0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8} + m);
}

// Two-source selections: [low half of x | high half of y], [high half of x | low half of y], ...
inline v16 low_high(v16 x, v16 y) {
  return __builtin_shuffle(x, y, lanes16{0, 1, 2, 3, 4, 5, 6, 7, 24, 25, 26, 27, 28, 29, 30, 31});
}
inline v16 high_low(v16 x, v16 y) {
  return __builtin_shuffle(x, y, lanes16{8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
}
inline v16 low_low(v16 x, v16 y) {
  return __builtin_shuffle(x, y, lanes16{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23});
}
inline v16 high_high(v16 x, v16 y) {
  return __builtin_shuffle(x, y, lanes16{8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31});
}

// Per head of a pair (A, B), the sum of its 24 features spread over three paired vectors (x0: A's, x1: A's
// then B's, x2: B's), as [8 partial sums of A | 8 partial sums of B].
inline v16 per_head(v16 x0, v16 x1, v16 x2) {
  return x1 + (low_low(x0, x2) + high_high(x0, x2));
}

// The sums of lanes 0-7 and of lanes 8-15 (lanes l and l + 4 first, then 2 apart, then 1, as sum_lanes).
inline void half_sums(v16 x, float& low, float& high) {
  x += __builtin_shuffle(x, lanes16{4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11});
  x += __builtin_shuffle(x, lanes16{2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13});
  x += __builtin_shuffle(x, lanes16{1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14});
  low = x[0];
  high = x[8];
}

// The pair-stage weights in paired-block order: pattern(k) = [block kLow[k] | block kHigh[k]] of 8-float rows.
struct WideWeights {
  int64_t n_scalar = 0;
  aligned_vector<float> rbf, w2, b2, w3;   // [8 m][3][16], [8 m][3][16], [3][16], [n_scalar][3][16]
  aligned_vector<float> rbf_rows, w2_rows;  // backward: [8 i][3][16] each

  // row(b): the 8 floats of block b -> out [3][16]
  template <typename Row>
  static void paired(float* out, Row row) {
    for (int k = 0; k < 3; ++k)
      for (int j = 0; j < 8; ++j) {
        out[16 * k + j] = row(kLow[k])[j];
        out[16 * k + 8 + j] = row(kHigh[k])[j];
      }
  }

  // w_rbf_t [8, 24], w2_t [3, 8, 8] (w2_t[b][m][i]), b2 [24], w3 [n_scalar, 24]; for a backward pass also
  // w_rbf [24, 8] and w2_n [3, 8, 8] (w2_n[b][i][m]), else null.
  WideWeights(const float* w_rbf_t, const float* w2_t, const float* b2_, const float* w3_, int64_t n_scalar_,
              const float* w_rbf, const float* w2_n)
      : n_scalar(n_scalar_), rbf(8 * 48), w2(8 * 48), b2(48), w3(n_scalar_ * 48) {
    for (int m = 0; m < 8; ++m) {
      paired(rbf.data() + 48 * m, [&](int b) { return w_rbf_t + 24 * m + 8 * b; });
      paired(w2.data() + 48 * m, [&](int b) { return w2_t + (8 * b + m) * 8; });
    }
    paired(b2.data(), [&](int b) { return b2_ + 8 * b; });
    for (int64_t c = 0; c < n_scalar; ++c) paired(w3.data() + 48 * c, [&](int b) { return w3_ + 24 * c + 8 * b; });
    if (!w_rbf) return;
    rbf_rows.resize(8 * 48);
    w2_rows.resize(8 * 48);
    for (int i = 0; i < 8; ++i) {
      paired(rbf_rows.data() + 48 * i, [&](int b) { return w_rbf + (8 * b + i) * 8; });
      paired(w2_rows.data() + 48 * i, [&](int b) { return w2_n + (8 * b + i) * 8; });
    }
  }
};

// radial_basis (attend_pairs.cpp) for 16 offsets at once: x = d / cutoff, the envelope and its slope at x,
// offsets [16], rbf the basis constants; out [16] and, if not null, slope [16].
inline void radial_basis_wide(float x, float envelope, float envelope_slope, const float* offsets, const float* rbf,
                              float* out, float* slope) {
  const v16 diff = x - load<16>(offsets), exponent = diff * diff * rbf[1];
  const v16 min_exponent = v16{} + rbf[5];
  const v16 gauss = exp_lanes<16>(exponent < min_exponent ? min_exponent : exponent);
  const v16 value = gauss * envelope;
  const auto kept = value > rbf[6];
  store<16>(out, kept ? value : v16{});
  if (!slope) return;
  const v16 free = exponent >= min_exponent ? 2.0f * rbf[1] * diff : v16{};
  store<16>(slope, kept ? (free * envelope + envelope_slope) * gauss * rbf[0] : v16{});
}

// Where the rows of NP head pairs go (null: not written): each points at the first head's row [3rh] of a
// pair's [h, 3rh] rows; values [2 NP, 2rh] and scalars [2 NP, n_scalar] at the first head's.
struct WideRows {
  float *pre1, *act1, *pre2, *hidden, *sig1, *sig2, *values, *scalars;
};

// out = SiLU(x) for the 3 NP vectors of NP head pairs (out may be x), keeping x in pre, the sigmoids in sig (with
// Sigmoids) and out in act: rows [2 NP, 24] at the first head's row, null: not kept.
template <int NP, bool Sigmoids>
inline void silu_wide(const v16 (&x)[NP][3], v16 (&out)[NP][3], float* pre, float* sig, float* act) {
  for (int n = 0; n < NP; ++n)
    for (int k = 0; k < 3; ++k) {
      const int64_t at = 48 * n + 16 * k;
      if (pre) store<16>(pre + at, x[n][k]);
      out[n][k] = silu_lanes<16, Sigmoids>(x[n][k], Sigmoids ? sig + at : nullptr);
      if (act) store<16>(act + at, out[n][k]);
    }
}

// The pair MLPs of NP head pairs (2 NP heads) of one pair: sender [2 NP, 24], receiver [2 NP, 8],
// radial [2 NP, 8], all at the first head's row; b3 [n_scalar].
template <int NP, bool Sigmoids>
inline void pair_heads_wide(const float* __restrict__ sender, const float* __restrict__ receiver,
                            const float* __restrict__ radial, const WideWeights& w, const float* b3,
                            const WideRows& out) {
  const float *__restrict__ w_rbf = w.rbf.data(), *__restrict__ w2 = w.w2.data(), *__restrict__ b2 = w.b2.data(),
              *__restrict__ w3 = w.w3.data();
  v16 x[NP][3], r[NP];
  for (int n = 0; n < NP; ++n) {
    const v16 pair_receiver = load<16>(receiver + 16 * n), zero = v16{};
    x[n][0] = load<16>(sender + 48 * n) + low_low(pair_receiver, zero);
    x[n][1] = load<16>(sender + 48 * n + 16) + high_high(zero, pair_receiver);
    x[n][2] = load<16>(sender + 48 * n + 32);
    r[n] = load<16>(radial + 16 * n);
  }
  for (int m = 0; m < 8; ++m) {
    const float* weights = w_rbf + 48 * m;
    const v16 w0 = load<16>(weights), w1 = load<16>(weights + 16), w2 = load<16>(weights + 32);
    for (int n = 0; n < NP; ++n) {
      x[n][0] += w0 * radial[16 * n + m];
      x[n][1] += w1 * spread(r[n], m);
      x[n][2] += w2 * radial[16 * n + 8 + m];
    }
  }
  v16 act[NP][3], y[NP][3];  // each step on all 3 NP vectors at once: independent chains of latencies
  silu_wide<NP, Sigmoids>(x, act, out.pre1, out.sig1, out.act1);
  for (int n = 0; n < NP; ++n)
    for (int k = 0; k < 3; ++k) y[n][k] = load<16>(b2 + 16 * k);
  for (int m = 0; m < 8; ++m)
    for (int k = 0; k < 3; ++k) {
      const v16 column = load<16>(w2 + 48 * m + 16 * k);
      for (int n = 0; n < NP; ++n) y[n][k] += column * spread(act[n][k], m);
    }
  silu_wide<NP, Sigmoids>(y, y, out.pre2, out.sig2, out.hidden);
  for (int n = 0; n < NP; ++n) {  // values: hidden[rh:] of head A, then of head B
    store<16>(out.values + 32 * n, high_low(y[n][0], y[n][1]));
    store<16>(out.values + 32 * n + 16, y[n][2]);
  }
  const int64_t n_scalar = w.n_scalar;
  for (int64_t c = 0; c < n_scalar; ++c) {
    const float* weights = w3 + 48 * c;
    const v16 w0 = load<16>(weights), w1 = load<16>(weights + 16), w2 = load<16>(weights + 32);
    for (int n = 0; n < NP; ++n) {
      float low, high;
      half_sums(per_head(w0 * y[n][0], w1 * y[n][1], w2 * y[n][2]), low, high);
      out.scalars[2 * n * n_scalar + c] = low + b3[c];
      out.scalars[(2 * n + 1) * n_scalar + c] = high + b3[c];
    }
  }
}

// A call's weight gradients in the paired layout of WideWeights (summed over pairs and head pairs), added into
// the caller's layouts once, at the end (unfold).
struct WideGrads {
  aligned_vector<float> w3, b2, w2, rbf, b3;  // [n_scalar][3][16], [3][16], [8 i][3][16] twice, [n_scalar]

  explicit WideGrads(int64_t n_scalar) : w3(n_scalar * 48), b2(48), w2(8 * 48), rbf(8 * 48), b3(n_scalar) {}

  // in [3][16] (paired layout) added into row(b) (the 8 floats of block b)
  template <typename Row>
  static void unpaired(const float* in, Row row) {
    for (int k = 0; k < 3; ++k)
      for (int j = 0; j < 8; ++j) {
        row(kLow[k])[j] += in[16 * k + j];
        row(kHigh[k])[j] += in[16 * k + 8 + j];
      }
  }

  // += into g_w3 [n_scalar, 24], g_b3 [n_scalar], g_b2 [24], g_w2 [3, 8, 8] (g_w2[b][i][m]), g_w_rbf [24, 8]
  void unfold(float* g_w3, float* g_b3, float* g_b2, float* g_w2, float* g_w_rbf) const {
    const int64_t n_scalar = static_cast<int64_t>(b3.size());
    for (int64_t c = 0; c < n_scalar; ++c) {
      unpaired(w3.data() + 48 * c, [&](int b) { return g_w3 + 24 * c + 8 * b; });
      g_b3[c] += b3[c];
    }
    unpaired(b2.data(), [&](int b) { return g_b2 + 8 * b; });
    for (int i = 0; i < 8; ++i) {
      unpaired(w2.data() + 48 * i, [&](int b) { return g_w2 + (8 * b + i) * 8; });
      unpaired(rbf.data() + 48 * i, [&](int b) { return g_w_rbf + (8 * b + i) * 8; });
    }
  }
};

// The backward pass of a product of paired vectors y = W x (as in pair_heads_wide: x's feature i of each half
// spread over it, times a weight vector; rows [8 i][3][16] the weights by i): given g, the gradient of y, adds
// sum_i spread(g, i) rows(i) to g_x and sum_n spread(g, i) x to the weight gradient g_w ([8 i][3][16]).
template <int NP>
inline void product_backward(const v16 (&g)[NP][3], const v16 (&x)[NP][3], const float* __restrict__ rows,
                             v16 (&g_x)[NP][3], float* __restrict__ g_w) {
  for (int i = 0; i < 8; ++i)
    for (int k = 0; k < 3; ++k) {
      const v16 row = load<16>(rows + 48 * i + 16 * k);
      v16 g_weight{};
      for (int n = 0; n < NP; ++n) {
        const v16 s = spread(g[n][k], i);
        g_weight += s * x[n][k];
        g_x[n][k] += s * row;
      }
      add_to<16>(g_w + 48 * i + 16 * k, g_weight);
    }
}

// The backward pass of pair_heads_wide for NP head pairs of one pair: from the gradients of the scalars
// (g_scalars [2 NP, n_scalar]) and values (g_values [2 NP, 2rh]) down to g_sender [2 NP, 24] and g_receiver
// [2 NP, 8] (both added to) and g_radial [2 NP, 8] (written), weight gradients summed into ``grads``.
// kept: the forward rows pre1, act1, pre2, hidden, sigmoid(pre1), sigmoid(pre2), each at the first head's row.
template <int NP>
inline void pair_backward_wide(const WideWeights& w, WideGrads& grads, const float* g_scalars, const float* g_values,
                               const float* radial, const float* const* kept, float* __restrict__ g_sender,
                               float* __restrict__ g_receiver, float* __restrict__ g_radial) {
  const int64_t n_scalar = w.n_scalar;
  // raw pointers in locals: the stores below (memcpy) could otherwise alias the vectors' own pointers
  const float *__restrict__ w3 = w.w3.data(), *__restrict__ w2_rows = w.w2_rows.data(),
              *__restrict__ rbf_rows = w.rbf_rows.data();
  float *__restrict__ g_w3 = grads.w3.data(), *__restrict__ g_b3 = grads.b3.data(),
        *__restrict__ g_b2 = grads.b2.data(), *__restrict__ g_w2 = grads.w2.data(),
        *__restrict__ g_rbf = grads.rbf.data();
  const v16 zero{};
  v16 g[NP][3], hidden[NP][3];
  for (int n = 0; n < NP; ++n) {
    const v16 head_a = load<16>(g_values + 32 * n);
    g[n][0] = low_low(zero, head_a);
    g[n][1] = high_high(head_a, zero);
    g[n][2] = load<16>(g_values + 32 * n + 16);
    for (int k = 0; k < 3; ++k) hidden[n][k] = load<16>(kept[3] + 48 * n + 16 * k);
  }
  for (int64_t c = 0; c < n_scalar; ++c) {
    const float* weights = w3 + 48 * c;
    v16 g_weight[3] = {zero, zero, zero};
    for (int n = 0; n < NP; ++n) {
      const float g_a = g_scalars[2 * n * n_scalar + c], g_b = g_scalars[(2 * n + 1) * n_scalar + c];
      const v16 a = zero + g_a, b = zero + g_b, spread_g[3] = {a, low_high(a, b), b};
      g_b3[c] += g_a + g_b;
      for (int k = 0; k < 3; ++k) {
        g[n][k] += spread_g[k] * load<16>(weights + 16 * k);
        g_weight[k] += spread_g[k] * hidden[n][k];
      }
    }
    for (int k = 0; k < 3; ++k) add_to<16>(g_w3 + 48 * c + 16 * k, g_weight[k]);
  }
  v16 act[NP][3];  // g becomes the gradient of pre2, then of act1, then of pre1
  for (int k = 0; k < 3; ++k) {
    v16 g_bias = zero;
    for (int n = 0; n < NP; ++n) {
      const int64_t at = 48 * n + 16 * k;
      g[n][k] *= silu_slope(load<16>(kept[2] + at), load<16>(kept[5] + at));
      g_bias += g[n][k];
      act[n][k] = load<16>(kept[1] + at);
    }
    add_to<16>(g_b2 + 16 * k, g_bias);
  }
  v16 g_act[NP][3] = {};
  product_backward<NP>(g, act, w2_rows, g_act, g_w2);
  v16 paired_radial[NP][3], g_r[NP][3] = {};
  for (int n = 0; n < NP; ++n) {
    for (int k = 0; k < 3; ++k) {
      const int64_t at = 48 * n + 16 * k;
      g[n][k] = g_act[n][k] * silu_slope(load<16>(kept[0] + at), load<16>(kept[4] + at));
      add_to<16>(g_sender + at, g[n][k]);
    }
    add_to<16>(g_receiver + 16 * n, low_high(g[n][0], g[n][1]));
    const v16 r = load<16>(radial + 16 * n);
    paired_radial[n][0] = low_low(r, r);
    paired_radial[n][1] = r;
    paired_radial[n][2] = high_high(r, r);
  }
  product_backward<NP>(g, paired_radial, rbf_rows, g_r, g_rbf);
  for (int n = 0; n < NP; ++n) store<16>(g_radial + 16 * n, per_head(g_r[n][0], g_r[n][1], g_r[n][2]));
}

}  // namespace
}  // namespace geomol_native

#else

namespace geomol_native {
struct WideWeights {};  // no 16-float loops on this processor
struct WideGrads {
  explicit WideGrads(int64_t) {}
};
}  // namespace geomol_native

#endif  // __AVX512F__

// The per-pair stage of GET's bilevel attention in one pass, and its backward pass (geomol/nn/native.py builds
// and calls them; geomol.nn.bilevel_attention._pair_stage is the PyTorch formulation of the same function).
//
// For every group (a receiving atom i and a block edge e; its pairs are consecutive, group_start[g] to
// group_start[g + 1]), every pair of it and every head, the three pair MLPs run on a few registers' worth of data:
//
//   pre1   = sender[s] + [receiver[g], 0, 0] + W_rbf radial          (3rh: attention, message, coordinate)
//   pre2   = blockdiag(W2_a, W2_m, W2_c) SiLU(pre1) + b2
//   hidden = SiLU(pre2);  scalars = W3 hidden + b3                    (2 + C: atom logit, block logit, w_c)
//
// then the softmax of the atom logits within the group gives alpha, and the group's outputs are
// summed[g] = sum_pairs alpha * hidden[rh:3rh] (the node part, then the coordinate part, each [h, rh]),
// block_sum[g] = sum_pairs scalars[1] and, per pair,
// alpha_weight = alpha * scalars[2:].  Nothing of size [pairs, heads, 3rh] is written unless asked for
// (the pre-activations, activations, scalars and alpha that a backward pass needs).
//
// radial is either given ([p, h, nr], nr = C R / h: head hd sees basis functions hd R/h ... (hd + 1) R/h - 1 of
// every channel) or computed here from the distances [p, C] with the enveloped Gaussian basis of
// geomol.nn.radial (offsets [R]; rbf = inv_cutoff, gamma, a, b, c, min_exponent, flush_below; envelope exponent).
//
// Layouts (row-major, contiguous): sender [n_s, h, 3rh] indexed by sender_index [p] (null: pair p reads row p);
// receiver [g, h, rh]; w_rbf_t [nr, 3rh] (W_rbf transposed); w2_t [3, rh, rh] with
// w2_t[b][k][i] = W2[b rh + i][b rh + k]; b2 [3rh]; w3 [2 + C, 3rh]; b3 [2 + C].
// Outputs: summed [g, 2, h, rh], block_sum [g, h], alpha_weight [p, h, C]; optional (null: not written)
// pre1, act1, pre2, hidden [p, h, 3rh], scalars [p, h, 2 + C], alpha [p, h].
//
// The backward pass (attend_pairs_backward, further down) recomputes this group by group, keeping each pair's rows
// in a small buffer, and runs the chain rule from the gradients of the three outputs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "native_math.h"
#include "native_packed.h"
#include "pair_heads_wide.h"

namespace {

using namespace geomol_native;

template <typename T>
struct Args {
  int64_t group_begin, group_end;
  const int64_t* group_start;
  int64_t h, nr, rh, C, n_rbf, envelope_p;
  const T *radial, *distance, *rbf_offset, *rbf, *sender;
  const int64_t* sender_index;
  const T *receiver, *w_rbf_t, *w2_t, *b2, *w3, *b3;
  T *summed, *block_sum, *alpha_weight;
  T *pre1, *act1, *pre2, *hidden, *scalars, *alpha;
};

// The basis values of one distance d into out[R] (geomol.nn.radial.RadialBasis.forward) and, if slope is not
// null, their derivatives with respect to d into slope[R] (RadialBasis.with_derivative).
template <typename T>
inline void radial_basis(T d, const Args<T>& a, T* __restrict__ out, T* __restrict__ slope = nullptr) {
  const T* rbf = a.rbf;  // inv_cutoff, gamma, a, b, c, min_exponent, flush_below
  const int64_t pe = a.envelope_p;
  const T x = d * rbf[0];
  T envelope = 0, envelope_slope = 0;
  if (x < T(1)) {
    T xp = 1;  // x^(p - 1)
    for (int64_t i = 1; i < pe; ++i) xp *= x;
    envelope = T(1) + xp * x * (rbf[2] + x * (rbf[3] + rbf[4] * x));
    envelope_slope = xp * (rbf[2] * pe + x * (rbf[3] * (pe + 1) + rbf[4] * (pe + 2) * x));
  }
  int64_t m = 0;
#ifdef GEOMOL_PAIR_HEADS_WIDE
  if constexpr (std::is_same_v<T, float>)
    for (; m + 16 <= a.n_rbf; m += 16)
      radial_basis_wide(x, envelope, envelope_slope, a.rbf_offset + m, rbf, out + m, slope ? slope + m : nullptr);
#endif
  for (; m < a.n_rbf; ++m) {
    const T diff = x - a.rbf_offset[m];
    const T exponent = diff * diff * rbf[1];
    const T gauss = exp_approx(std::max(exponent, rbf[5]));
    const T value = gauss * envelope;
    const bool kept = value > rbf[6];
    out[m] = kept ? value : T(0);
    if (slope) {
      const T free = exponent >= rbf[5] ? T(2) * rbf[1] * diff : T(0);  // the clamp holds the exponent below
      slope[m] = kept ? (free * envelope + envelope_slope) * gauss * rbf[0] : T(0);
    }
  }
}

// One pair and head: the three pair MLPs and the scalar read-outs. sig1, sig2: the sigmoids of pre1, pre2
// (SiLU(x) = x sigmoid(x); a backward pass reuses them).
template <typename T>
inline void pair_mlps(const T* __restrict__ sender, const T* __restrict__ receiver, const T* __restrict__ radial,
                      const Args<T>& a, T* __restrict__ pre1, T* __restrict__ act1, T* __restrict__ pre2,
                      T* __restrict__ hidden, T* __restrict__ sig1, T* __restrict__ sig2, T* __restrict__ scalars) {
  const int64_t rh = a.rh, nr = a.nr, w = 3 * rh;
  for (int64_t j = 0; j < w; ++j) pre1[j] = sender[j];
  for (int64_t j = 0; j < rh; ++j) pre1[j] += receiver[j];
  for (int64_t m = 0; m < nr; ++m)
    for (int64_t j = 0; j < w; ++j) pre1[j] += a.w_rbf_t[m * w + j] * radial[m];
  for (int64_t j = 0; j < w; ++j) act1[j] = pre1[j] * (sig1[j] = sigmoid(pre1[j]));
  for (int64_t j = 0; j < w; ++j) pre2[j] = a.b2[j];
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t m = 0; m < rh; ++m)
      for (int64_t i = 0; i < rh; ++i) pre2[b * rh + i] += a.w2_t[(b * rh + m) * rh + i] * act1[b * rh + m];
  for (int64_t j = 0; j < w; ++j) hidden[j] = pre2[j] * (sig2[j] = sigmoid(pre2[j]));
  for (int64_t c = 0; c < 2 + a.C; ++c) {
    T sum = 0;
    for (int64_t j = 0; j < w; ++j) sum += a.w3[c * w + j] * hidden[j];
    scalars[c] = sum + a.b3[c];
  }
}

// NH heads of one pair at once (rh = nr = L): NH independent chains of dependent vector operations, so that the
// processor overlaps them (one head alone is a ~200-cycle chain of latencies). Rows of consecutive heads are
// consecutive in every [p, h, .] tensor; kept tensors (null: not written) point at the first head's row.
template <int L, int NH, bool Sigmoids>
inline void pair_heads_lanes(const float* __restrict__ sender, const float* __restrict__ receiver,
                             const float* __restrict__ radial, const Args<float>& a, float* __restrict__ pre1,
                             float* __restrict__ act1, float* __restrict__ pre2, float* __restrict__ hidden,
                             float* __restrict__ sig1, float* __restrict__ sig2, float* __restrict__ values,
                             float* __restrict__ scalars) {
  constexpr int W = 3 * L;
  const int64_t n_scalar = 2 + a.C;
  vec<L> x[NH][3], y[NH][3];
  for (int n = 0; n < NH; ++n) {
    for (int b = 0; b < 3; ++b) x[n][b] = load<L>(sender + W * n + L * b);
    x[n][0] += load<L>(receiver + L * n);
  }
  for (int m = 0; m < L; ++m)
    for (int b = 0; b < 3; ++b) {
      const vec<L> column = load<L>(a.w_rbf_t + m * W + L * b);
      for (int n = 0; n < NH; ++n) x[n][b] += column * radial[L * n + m];
    }
  for (int b = 0; b < 3; ++b) {
    vec<L> act[NH];
    for (int n = 0; n < NH; ++n) {
      if (pre1) store<L>(pre1 + W * n + L * b, x[n][b]);
      act[n] = silu_lanes<L, Sigmoids>(x[n][b], Sigmoids ? sig1 + W * n + L * b : nullptr);
      if (act1) store<L>(act1 + W * n + L * b, act[n]);
      y[n][b] = load<L>(a.b2 + L * b);
    }
    for (int m = 0; m < L; ++m) {
      const vec<L> column = load<L>(a.w2_t + (L * b + m) * L);
      for (int n = 0; n < NH; ++n) y[n][b] += column * act[n][m];
    }
    for (int n = 0; n < NH; ++n) {
      if (pre2) store<L>(pre2 + W * n + L * b, y[n][b]);
      y[n][b] = silu_lanes<L, Sigmoids>(y[n][b], Sigmoids ? sig2 + W * n + L * b : nullptr);
      if (hidden) store<L>(hidden + W * n + L * b, y[n][b]);
      if (b > 0) store<L>(values + 2 * L * n + L * (b - 1), y[n][b]);
    }
  }
  for (int64_t c = 0; c < n_scalar; ++c) {
    const float* w3 = a.w3 + c * W;
    const vec<L> w0 = load<L>(w3), w1 = load<L>(w3 + L), w2 = load<L>(w3 + 2 * L);
    for (int n = 0; n < NH; ++n)
      scalars[n * n_scalar + c] = sum_lanes<L>(w0 * y[n][0] + w1 * y[n][1] + w2 * y[n][2]) + a.b3[c];
  }
}

// Destinations of one pair's per-head rows ([h, 3rh] each, null: not written) and its per-head results.
template <typename T>
struct PairRows {
  T *pre1, *act1, *pre2, *hidden, *sig1, *sig2;
  T* values;   // [h, 2rh]: hidden[rh:]
  T* scalars;  // [h, 2 + C]
};

template <typename T>
inline T* offset(T* base, int64_t by) { return base ? base + by : nullptr; }

// The pair MLPs of all h heads of pair p (sending row s) in group g. work: 4 (3rh) scratch values.
template <typename T>
inline void pair_all_heads_generic(int64_t s, int64_t g, const T* radial, const Args<T>& a, T* work,
                                   const PairRows<T>& out) {
  const int64_t h = a.h, rh = a.rh, nr = a.nr, w = 3 * rh, n_scalar = 2 + a.C;
  for (int64_t hd = 0; hd < h; ++hd) {
    T* pre1 = out.pre1 ? out.pre1 + hd * w : work;
    T* act1 = out.act1 ? out.act1 + hd * w : work + w;
    T* pre2 = out.pre2 ? out.pre2 + hd * w : work + 2 * w;
    T* hidden = out.hidden ? out.hidden + hd * w : work + 3 * w;
    T* sig1 = out.sig1 ? out.sig1 + hd * w : work + 4 * w;
    T* sig2 = out.sig2 ? out.sig2 + hd * w : work + 5 * w;
    pair_mlps(a.sender + (s * h + hd) * w, a.receiver + (g * h + hd) * rh, radial + hd * nr, a, pre1, act1, pre2,
              hidden, sig1, sig2, out.scalars + hd * n_scalar);
    std::memcpy(out.values + hd * 2 * rh, hidden + rh, 2 * rh * sizeof(T));
  }
}

// Heads in fours, then one by one, through pair_heads_lanes<L> (keeping the sigmoids where out.sig1 is given),
// from head ``first`` on.
template <int L, bool Sigmoids>
inline void pair_all_heads_lanes(int64_t s, int64_t g, const float* radial, const Args<float>& a,
                                 const PairRows<float>& out, int64_t first = 0) {
  constexpr int W = 3 * L;
  const int64_t h = a.h, n_scalar = 2 + a.C;
  int64_t hd = first;
  for (; hd + 4 <= h; hd += 4)
    pair_heads_lanes<L, 4, Sigmoids>(a.sender + (s * h + hd) * W, a.receiver + (g * h + hd) * L, radial + hd * L, a,
                                     offset(out.pre1, hd * W), offset(out.act1, hd * W), offset(out.pre2, hd * W),
                                     offset(out.hidden, hd * W), offset(out.sig1, hd * W), offset(out.sig2, hd * W),
                                     out.values + hd * 2 * L, out.scalars + hd * n_scalar);
  for (; hd < h; ++hd)
    pair_heads_lanes<L, 1, Sigmoids>(a.sender + (s * h + hd) * W, a.receiver + (g * h + hd) * L, radial + hd * L, a,
                                     offset(out.pre1, hd * W), offset(out.act1, hd * W), offset(out.pre2, hd * W),
                                     offset(out.hidden, hd * W), offset(out.sig1, hd * W), offset(out.sig2, hd * W),
                                     out.values + hd * 2 * L, out.scalars + hd * n_scalar);
}

#ifdef GEOMOL_PAIR_HEADS_WIDE
// rh = nr = 8 on 16-float vectors: head pairs in twos, then one, then an odd last head through the 8-float loop.
template <bool Sigmoids>
inline void pair_all_heads_wide(int64_t s, int64_t g, const float* radial, const Args<float>& a,
                                const WideWeights& wide, const PairRows<float>& out) {
  const int64_t h = a.h, n_scalar = 2 + a.C;
  const auto run = [&](auto pairs, int64_t hd) {
    constexpr int NP = decltype(pairs)::value;
    pair_heads_wide<NP, Sigmoids>(a.sender + (s * h + hd) * 24, a.receiver + (g * h + hd) * 8, radial + hd * 8, wide,
                                  a.b3, WideRows{offset(out.pre1, hd * 24), offset(out.act1, hd * 24),
                                                 offset(out.pre2, hd * 24), offset(out.hidden, hd * 24),
                                                 offset(out.sig1, hd * 24), offset(out.sig2, hd * 24),
                                                 out.values + hd * 16, out.scalars + hd * n_scalar});
  };
  int64_t hd = 0;
  for (; hd + 4 <= h; hd += 4) run(std::integral_constant<int, 2>{}, hd);
  for (; hd + 2 <= h; hd += 2) run(std::integral_constant<int, 1>{}, hd);
  if (hd < h) pair_all_heads_lanes<8, Sigmoids>(s, g, radial, a, out, hd);
}
#endif

template <typename T>
inline void pair_all_heads(int64_t s, int64_t g, const T* radial, const Args<T>& a, T* work, const PairRows<T>& out,
                           const WideWeights* /*wide*/) {
  pair_all_heads_generic(s, g, radial, a, work, out);
}

// float32: 16-float loops where ``wide`` is given, else 8- or 4-float ones where rh = nr is 8 or 4.
template <bool Sigmoids>
inline void pair_all_heads_float(int64_t s, int64_t g, const float* radial, const Args<float>& a, float* work,
                                 const PairRows<float>& out, const WideWeights* wide) {
#ifdef GEOMOL_PAIR_HEADS_WIDE
  if (wide) return pair_all_heads_wide<Sigmoids>(s, g, radial, a, *wide, out);
#endif
  if (a.rh == 8 && a.nr == 8)
    pair_all_heads_lanes<8, Sigmoids>(s, g, radial, a, out);
  else if (a.rh == 4 && a.nr == 4)
    pair_all_heads_lanes<4, Sigmoids>(s, g, radial, a, out);
  else
    pair_all_heads_generic(s, g, radial, a, work, out);
}

template <>
inline void pair_all_heads<float>(int64_t s, int64_t g, const float* radial, const Args<float>& a, float* work,
                                  const PairRows<float>& out, const WideWeights* wide) {
  if (out.sig1)
    pair_all_heads_float<true>(s, g, radial, a, work, out, wide);
  else
    pair_all_heads_float<false>(s, g, radial, a, work, out, wide);
}

// The paired-block weights when the 16-float loops apply (float32, rh = nr = 8, two heads or more, and not
// switched off by GEOMOL_NATIVE_WIDE=0), else none; w_rbf and w2_n (backward passes) may be null.
template <typename T>
std::unique_ptr<WideWeights> wide_weights(const Args<T>& a, const T* w_rbf, const T* w2_n) {
#ifdef GEOMOL_PAIR_HEADS_WIDE
  const char* wide = std::getenv("GEOMOL_NATIVE_WIDE");
  if constexpr (std::is_same_v<T, float>)
    if (a.rh == 8 && a.nr == 8 && a.h >= 2 && !(wide && wide[0] == '0'))
      return std::make_unique<WideWeights>(a.w_rbf_t, a.w2_t, a.b2, a.w3, 2 + a.C, w_rbf, w2_n);
#endif
  return nullptr;
}

// Per-group scratch: the radial basis of the current pair and, per pair q of the group, its heads' results.
template <typename T>
struct GroupWork {
  aligned_vector<T> values, scalars, weights, work, basis, basis_slope, radial, rows, head_top, head_total;
  GroupWork(const Args<T>& a, int64_t max_k, bool with_rows)
      : values(max_k * a.h * 2 * a.rh), scalars(max_k * a.h * (2 + a.C)), weights(max_k * a.h), work(18 * a.rh),
        basis(a.C * a.n_rbf), basis_slope(a.C * a.n_rbf), radial(a.h * a.nr),
        rows(with_rows ? max_k * a.h * 18 * a.rh : 0), head_top(a.h), head_total(a.h) {}
};

template <typename T>
int64_t largest_group(const Args<T>& a) {
  int64_t max_k = 1;
  for (int64_t g = a.group_begin; g < a.group_end; ++g)
    max_k = std::max(max_k, a.group_start[g + 1] - a.group_start[g]);
  return max_k;
}

// [C, R] per channel -> [h, C, R / h]: each head's slice of every channel's basis.
template <typename T>
void to_heads(const Args<T>& a, const T* basis, T* radial) {
  const int64_t C = a.C, per_head = a.n_rbf / a.h;
  for (int64_t hd = 0; hd < a.h; ++hd)
    for (int64_t c = 0; c < C; ++c)
      std::memcpy(radial + (hd * C + c) * per_head, basis + c * a.n_rbf + hd * per_head, per_head * sizeof(T));
}

// Pair p's radial features [h, nr]: the given rows (a.radial, read in place), else the basis of its distances
// written to radial [h, nr] (and, if slope is not null, its derivative to slope [h, nr]).
template <typename T>
const T* pair_radial(int64_t p, const Args<T>& a, GroupWork<T>& work, T* radial, T* slope = nullptr) {
  if (a.radial) return a.radial + p * a.h * a.nr;
  if (a.C == 1) {  // [1, R] per channel is [h, R / h] per head already
    radial_basis(a.distance[p], a, radial, slope);
    return radial;
  }
  for (int64_t c = 0; c < a.C; ++c)
    radial_basis(a.distance[p * a.C + c], a, work.basis.data() + c * a.n_rbf,
                 slope ? work.basis_slope.data() + c * a.n_rbf : nullptr);
  to_heads(a, work.basis.data(), radial);
  if (slope) to_heads(a, work.basis_slope.data(), slope);
  return radial;
}

// The softmax over the group's k pairs of every head's atom logits into work.weights[q h + hd] (all heads in one
// sweep: the exponentials are independent, and each head's sum is inverted once).
template <typename T>
void group_softmax(int64_t k, const Args<T>& a, GroupWork<T>& work) {
  const int64_t h = a.h, n_scalar = 2 + a.C;
  if (k == 1) {  // a group of one pair (half of them): weight 1 (NaN for a logit that is not finite, as below)
    for (int64_t hd = 0; hd < h; ++hd) {
      const T logit = work.scalars[hd * n_scalar];
      work.weights[hd] = T(1) + (logit - logit);
    }
    return;
  }
  T *top = work.head_top.data(), *total = work.head_total.data();
  std::fill(top, top + h, -std::numeric_limits<T>::infinity());
  std::fill(total, total + h, T(0));
  for (int64_t q = 0; q < k; ++q)
    for (int64_t hd = 0; hd < h; ++hd) top[hd] = std::max(top[hd], work.scalars[(q * h + hd) * n_scalar]);
  for (int64_t q = 0; q < k; ++q)
    for (int64_t hd = 0; hd < h; ++hd)
      total[hd] += (work.weights[q * h + hd] = exp_approx(work.scalars[(q * h + hd) * n_scalar] - top[hd]));
  for (int64_t hd = 0; hd < h; ++hd) total[hd] = T(1) / total[hd];
  for (int64_t q = 0; q < k; ++q)
    for (int64_t hd = 0; hd < h; ++hd) work.weights[q * h + hd] *= total[hd];
}

// Head hd's sums over the group's k pairs of alpha * values (work.weights, work.values), the node part into
// node [rh] and the coordinate part into coord [rh].
template <typename T>
inline void weighted_values(int64_t k, const Args<T>& a, const GroupWork<T>& work, int64_t hd, T* node, T* coord) {
  const int64_t h = a.h, rh = a.rh;
#ifdef GEOMOL_PAIR_HEADS_WIDE
  if constexpr (std::is_same_v<T, float>)
    if (rh == 8) {  // both parts in one 16-float vector
      vec<16> sum{};
      for (int64_t q = 0; q < k; ++q)
        sum += work.weights[q * h + hd] * load<16>(work.values.data() + (q * h + hd) * 16);
      const vec<8> low = __builtin_shufflevector(sum, sum, 0, 1, 2, 3, 4, 5, 6, 7),
                   high = __builtin_shufflevector(sum, sum, 8, 9, 10, 11, 12, 13, 14, 15);
      store<8>(node, low);
      store<8>(coord, high);
      return;
    }
#endif
  for (int64_t j = 0; j < rh; ++j) node[j] = coord[j] = 0;
  for (int64_t q = 0; q < k; ++q) {
    const T alpha = work.weights[q * h + hd];
    const T* v = work.values.data() + (q * h + hd) * 2 * rh;
    for (int64_t j = 0; j < rh; ++j) {
      node[j] += alpha * v[j];
      coord[j] += alpha * v[rh + j];
    }
  }
}

template <typename T>
void attend_pairs(const Args<T>& a) {
  const int64_t h = a.h, C = a.C, rh = a.rh, w = 3 * rh, n_scalar = 2 + C;
  GroupWork<T> work(a, largest_group(a), false);
  const std::unique_ptr<WideWeights> wide = wide_weights<T>(a, nullptr, nullptr);
  for (int64_t g = a.group_begin; g < a.group_end; ++g) {
    const int64_t first = a.group_start[g], k = a.group_start[g + 1] - first;
    for (int64_t q = 0; q < k; ++q) {
      const int64_t p = first + q, row = p * h;
      pair_all_heads(a.sender_index ? a.sender_index[p] : p, g, pair_radial(p, a, work, work.radial.data()), a,
                     work.work.data(),
                     PairRows<T>{offset(a.pre1, row * w), offset(a.act1, row * w), offset(a.pre2, row * w),
                                 offset(a.hidden, row * w), nullptr, nullptr, work.values.data() + q * h * 2 * rh,
                                 work.scalars.data() + q * h * n_scalar},
                     wide.get());
      if (a.scalars) std::memcpy(a.scalars + row * n_scalar, work.scalars.data() + q * h * n_scalar,
                                 h * n_scalar * sizeof(T));
    }
    group_softmax(k, a, work);
    for (int64_t hd = 0; hd < h; ++hd) {  // the sums weighted by the softmax over the group's pairs
      T block = 0;
      T* node = a.summed + (g * 2 * h + hd) * rh;  // summed[g, 0, hd]; summed[g, 1, hd] h rh further
      weighted_values(k, a, work, hd, node, node + h * rh);
      for (int64_t q = 0; q < k; ++q) {
        const int64_t row = (first + q) * h + hd, slot = q * h + hd;
        const T alpha = work.weights[slot];
        for (int64_t c = 0; c < C; ++c) a.alpha_weight[row * C + c] = alpha * work.scalars[slot * n_scalar + 2 + c];
        block += work.scalars[slot * n_scalar + 1];
        if (a.alpha) a.alpha[row] = alpha;
      }
      a.block_sum[g * h + hd] = block;
    }
  }
}

// ----------------------------------------------------------------------------------------------- backward pass
// Gradients of the pair stage's outputs (summed, block_sum, alpha_weight) flow back to the sender rows (g_sender
// [p, h, 3rh], one row per pair, or with sender_index [n_s, h, 3rh], per sending atom; added (+=) to
// zero-initialised rows), the receiver rows, the radial features (g_radial [p, h, nr], when radial is given) or the
// distances (g_distance [p, C], when the basis is computed here) and the weights; weight gradients are accumulated
// (+=) into zero-initialised buffers, one set per thread. Layouts: w_rbf [3rh, nr]; w2_n [3, rh, rh] with
// w2_n[b][i][m] = W2[b rh + i][b rh + m] (g_w2 the same); g_w_rbf [3rh, nr]; g_w3 [2 + C, 3rh].
template <typename T>
struct Grads {
  const T *w_rbf, *w2_n, *g_summed, *g_block_sum, *g_alpha_weight;
  T *g_sender, *g_receiver, *g_radial, *g_distance, *g_w_rbf, *g_w2, *g_b2, *g_w3, *g_b3;
};

// The forward pass's rows of one pair and head, kept for its backward pass: pre1, act1, pre2, hidden,
// sigmoid(pre1), sigmoid(pre2), each [3rh], the k-th at rows + k * stride.
template <typename T>
struct KeptRows {
  const T* rows;
  int64_t stride;
  const T* operator[](int k) const { return rows + k * stride; }
};

// One pair and head, generic sizes: the chain rule from the scalars' and the values' gradients down to pre1.
// g_scalars [2 + C]; g_values [2rh] (alpha * g_summed).
template <typename T>
void pair_backward(const Args<T>& a, const Grads<T>& d, const T* g_scalars, const T* g_values, const T* radial,
                   KeptRows<T> kept, T* work, T* g_sender, T* g_receiver, T* g_radial) {
  const int64_t rh = a.rh, nr = a.nr, w = 3 * rh, n_scalar = 2 + a.C;
  const T *pre1 = kept[0], *act1 = kept[1], *pre2 = kept[2], *hidden = kept[3], *sig1 = kept[4], *sig2 = kept[5];
  T* g_hidden = work;
  T* g_pre2 = work + w;
  for (int64_t j = 0; j < w; ++j) g_hidden[j] = j >= rh ? g_values[j - rh] : T(0);
  for (int64_t c = 0; c < n_scalar; ++c) {
    d.g_b3[c] += g_scalars[c];
    for (int64_t j = 0; j < w; ++j) {
      g_hidden[j] += g_scalars[c] * a.w3[c * w + j];
      d.g_w3[c * w + j] += g_scalars[c] * hidden[j];
    }
  }
  for (int64_t j = 0; j < w; ++j) {
    g_pre2[j] = g_hidden[j] * silu_slope(pre2[j], sig2[j]);
    d.g_b2[j] += g_pre2[j];
  }
  T* g_pre1 = work + 2 * w;
  for (int64_t j = 0; j < w; ++j) g_pre1[j] = 0;
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t i = 0; i < rh; ++i)
      for (int64_t m = 0; m < rh; ++m) {
        d.g_w2[(b * rh + i) * rh + m] += g_pre2[b * rh + i] * act1[b * rh + m];
        g_pre1[b * rh + m] += g_pre2[b * rh + i] * d.w2_n[(b * rh + i) * rh + m];
      }
  for (int64_t j = 0; j < w; ++j) {
    g_pre1[j] *= silu_slope(pre1[j], sig1[j]);
    g_sender[j] += g_pre1[j];
  }
  for (int64_t j = 0; j < rh; ++j) g_receiver[j] += g_pre1[j];
  for (int64_t m = 0; m < nr; ++m) g_radial[m] = 0;
  for (int64_t j = 0; j < w; ++j)
    for (int64_t m = 0; m < nr; ++m) {
      d.g_w_rbf[j * nr + m] += g_pre1[j] * radial[m];
      g_radial[m] += g_pre1[j] * d.w_rbf[j * nr + m];
    }
}

// pair_backward for float32 with rh = nr = L, in vectors, for NH heads of one pair at once (independent chains
// the processor overlaps; weight gradients summed over the NH heads in registers before they reach memory).
// Per-head inputs and outputs are consecutive rows: g_scalars [NH, 2 + C], g_values [NH, 2L], radial [NH, L],
// the kept rows [NH, 3L] each, g_sender [NH, 3L], g_receiver [NH, L], g_radial [NH, L].
template <int L, int NH>
inline void pair_backward_lanes(const Args<float>& a, const Grads<float>& d, const float* g_scalars,
                                const float* g_values, const float* radial, KeptRows<float> kept,
                                float* __restrict__ g_sender,
                                float* __restrict__ g_receiver, float* __restrict__ g_radial) {
  constexpr int W = 3 * L;
  const int64_t n_scalar = 2 + a.C;
  const float *pre1 = kept[0], *act1 = kept[1], *pre2 = kept[2], *hidden = kept[3], *sig1 = kept[4], *sig2 = kept[5];
  vec<L> g_hidden[NH][3], h[NH][3], g_pre1[NH][3];
  for (int n = 0; n < NH; ++n) {
    g_hidden[n][0] = vec<L>{};
    g_hidden[n][1] = load<L>(g_values + 2 * L * n);
    g_hidden[n][2] = load<L>(g_values + 2 * L * n + L);
    for (int b = 0; b < 3; ++b) h[n][b] = load<L>(hidden + W * n + L * b);
  }
  for (int64_t c = 0; c < n_scalar; ++c) {
    vec<L> weight[3], g_weight[3] = {vec<L>{}, vec<L>{}, vec<L>{}};
    float g_bias = 0;
    for (int b = 0; b < 3; ++b) weight[b] = load<L>(a.w3 + c * W + L * b);
    for (int n = 0; n < NH; ++n) {
      const float g = g_scalars[n * n_scalar + c];
      g_bias += g;
      for (int b = 0; b < 3; ++b) {
        g_hidden[n][b] += g * weight[b];
        g_weight[b] += g * h[n][b];
      }
    }
    d.g_b3[c] += g_bias;
    for (int b = 0; b < 3; ++b) add_to<L>(d.g_w3 + c * W + L * b, g_weight[b]);
  }
  for (int b = 0; b < 3; ++b) {
    vec<L> g_pre2[NH], act[NH], g_act[NH], g_bias = vec<L>{};
    for (int n = 0; n < NH; ++n) {
      const int64_t at = W * n + L * b;
      g_pre2[n] = g_hidden[n][b] * silu_slope(load<L>(pre2 + at), load<L>(sig2 + at));
      g_bias += g_pre2[n];
      act[n] = load<L>(act1 + W * n + L * b);
      g_act[n] = vec<L>{};
    }
    add_to<L>(d.g_b2 + L * b, g_bias);
    for (int i = 0; i < L; ++i) {
      const vec<L> row = load<L>(d.w2_n + (L * b + i) * L);
      vec<L> g_weight = vec<L>{};
      for (int n = 0; n < NH; ++n) {
        g_weight += g_pre2[n][i] * act[n];
        g_act[n] += g_pre2[n][i] * row;
      }
      add_to<L>(d.g_w2 + (L * b + i) * L, g_weight);
    }
    for (int n = 0; n < NH; ++n) {
      const int64_t at = W * n + L * b;
      g_pre1[n][b] = g_act[n] * silu_slope(load<L>(pre1 + at), load<L>(sig1 + at));
      add_to<L>(g_sender + W * n + L * b, g_pre1[n][b]);
    }
  }
  vec<L> r[NH], g_r[NH];
  for (int n = 0; n < NH; ++n) {
    add_to<L>(g_receiver + L * n, g_pre1[n][0]);
    r[n] = load<L>(radial + L * n);
    g_r[n] = vec<L>{};
  }
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < L; ++i) {
      const vec<L> row = load<L>(d.w_rbf + (L * b + i) * L);
      vec<L> g_weight = vec<L>{};
      for (int n = 0; n < NH; ++n) {
        g_weight += g_pre1[n][b][i] * r[n];
        g_r[n] += g_pre1[n][b][i] * row;
      }
      add_to<L>(d.g_w_rbf + (L * b + i) * L, g_weight);
    }
  for (int n = 0; n < NH; ++n) store<L>(g_radial + L * n, g_r[n]);
}

// Heads in fours, then one by one, through pair_backward_lanes<L> (rows [6, h, 3L]: see KeptRows), from head
// ``first`` on.
template <int L>
inline void pair_all_heads_backward_lanes(const Args<float>& a, const Grads<float>& d, const float* g_scalars,
                                          const float* g_values, const float* radial, const float* rows,
                                          float* g_sender, float* g_receiver, float* g_radial, int64_t first = 0) {
  constexpr int W = 3 * L;
  const int64_t h = a.h, n_scalar = 2 + a.C;
  int64_t hd = first;
  for (; hd + 4 <= h; hd += 4)
    pair_backward_lanes<L, 4>(a, d, g_scalars + hd * n_scalar, g_values + hd * 2 * L, radial + hd * L,
                              KeptRows<float>{rows + hd * W, h * W}, g_sender + hd * W, g_receiver + hd * L,
                              g_radial + hd * L);
  for (; hd < h; ++hd)
    pair_backward_lanes<L, 1>(a, d, g_scalars + hd * n_scalar, g_values + hd * 2 * L, radial + hd * L,
                              KeptRows<float>{rows + hd * W, h * W}, g_sender + hd * W, g_receiver + hd * L,
                              g_radial + hd * L);
}

// The backward pass of all h heads of one pair: rows [6, h, 3rh] (see KeptRows), g_sender [h, 3rh],
// g_receiver [h, rh], g_radial [h, nr].
template <typename T>
inline void pair_all_heads_backward_generic(const Args<T>& a, const Grads<T>& d, const T* g_scalars,
                                            const T* g_values, const T* radial, const T* rows, T* work, T* g_sender,
                                            T* g_receiver, T* g_radial) {
  const int64_t h = a.h, rh = a.rh, nr = a.nr, w = 3 * rh, n_scalar = 2 + a.C;
  for (int64_t hd = 0; hd < h; ++hd)
    pair_backward(a, d, g_scalars + hd * n_scalar, g_values + hd * 2 * rh, radial + hd * nr,
                  KeptRows<T>{rows + hd * w, h * w}, work, g_sender + hd * w, g_receiver + hd * rh, g_radial + hd * nr);
}

#ifdef GEOMOL_PAIR_HEADS_WIDE
// rh = nr = 8 on 16-float vectors (pair_backward_wide): head pairs in twos, then one, then an odd last head
// through the 8-float loop.
inline void pair_all_heads_backward_wide(const Args<float>& a, const Grads<float>& d, const WideWeights& wide,
                                         WideGrads& wide_grads, const float* g_scalars, const float* g_values,
                                         const float* radial, const float* rows, float* g_sender, float* g_receiver,
                                         float* g_radial) {
  const int64_t h = a.h, n_scalar = 2 + a.C;
  const auto run = [&](auto pairs, int64_t hd) {
    constexpr int NP = decltype(pairs)::value;
    const float* kept[6];
    for (int k = 0; k < 6; ++k) kept[k] = rows + k * h * 24 + hd * 24;
    pair_backward_wide<NP>(wide, wide_grads, g_scalars + hd * n_scalar, g_values + hd * 16, radial + hd * 8, kept,
                           g_sender + hd * 24, g_receiver + hd * 8, g_radial + hd * 8);
  };
  int64_t hd = 0;
  for (; hd + 4 <= h; hd += 4) run(std::integral_constant<int, 2>{}, hd);
  for (; hd + 2 <= h; hd += 2) run(std::integral_constant<int, 1>{}, hd);
  if (hd < h)
    pair_all_heads_backward_lanes<8>(a, d, g_scalars, g_values, radial, rows, g_sender, g_receiver, g_radial, hd);
}
#endif

template <typename T>
inline void pair_all_heads_backward(const Args<T>& a, const Grads<T>& d, const T* g_scalars, const T* g_values,
                                    const T* radial, const T* rows, T* work, T* g_sender, T* g_receiver,
                                    T* g_radial, const WideWeights* /*wide*/, WideGrads* /*wide_grads*/) {
  pair_all_heads_backward_generic(a, d, g_scalars, g_values, radial, rows, work, g_sender, g_receiver, g_radial);
}

template <>
inline void pair_all_heads_backward<float>(const Args<float>& a, const Grads<float>& d, const float* g_scalars,
                                           const float* g_values, const float* radial, const float* rows,
                                           float* work, float* g_sender, float* g_receiver, float* g_radial,
                                           const WideWeights* wide, WideGrads* wide_grads) {
#ifdef GEOMOL_PAIR_HEADS_WIDE
  if (wide)
    pair_all_heads_backward_wide(a, d, *wide, *wide_grads, g_scalars, g_values, radial, rows, g_sender, g_receiver,
                                 g_radial);
  else
#endif
  if (a.rh == 8 && a.nr == 8)
    pair_all_heads_backward_lanes<8>(a, d, g_scalars, g_values, radial, rows, g_sender, g_receiver, g_radial);
  else if (a.rh == 4 && a.nr == 4)
    pair_all_heads_backward_lanes<4>(a, d, g_scalars, g_values, radial, rows, g_sender, g_receiver, g_radial);
  else
    pair_all_heads_backward_generic(a, d, g_scalars, g_values, radial, rows, work, g_sender, g_receiver, g_radial);
}

template <typename T>
void attend_pairs_backward(const Args<T>& a, const Grads<T>& d) {
  const int64_t h = a.h, C = a.C, rh = a.rh, nr = a.nr, w = 3 * rh, n_scalar = 2 + C;
  const int64_t max_k = largest_group(a);
  GroupWork<T> work(a, max_k, true);
  const std::unique_ptr<WideWeights> wide = wide_weights<T>(a, d.w_rbf, d.w2_n);
  std::unique_ptr<WideGrads> wide_grads = wide ? std::make_unique<WideGrads>(n_scalar) : nullptr;
  aligned_vector<T> g_alpha(max_k * h), radial(max_k * h * nr), slope(max_k * h * nr);
  std::vector<const T*> features(max_k);  // each pair's radial features: in radial, or read in place (a.radial)
  aligned_vector<T> g_scalars(max_k * h * n_scalar), g_values(max_k * h * 2 * rh), g_radial(h * nr);
  aligned_vector<T> g_summed(2 * rh);  // one group's and head's, node part then coordinate part
  for (int64_t g = a.group_begin; g < a.group_end; ++g) {
    const int64_t first = a.group_start[g], k = a.group_start[g + 1] - first;
    // forward again, keeping each pair's rows [6][h][3rh]: pre1, act1, pre2, hidden, sigmoid(pre1), sigmoid(pre2)
    for (int64_t q = 0; q < k; ++q) {
      const int64_t p = first + q;
      features[q] = pair_radial(p, a, work, radial.data() + q * h * nr, slope.data() + q * h * nr);
      T* rows = work.rows.data() + q * h * 6 * w;
      pair_all_heads(a.sender_index ? a.sender_index[p] : p, g, features[q], a, work.work.data(),
                     PairRows<T>{rows, rows + h * w, rows + 2 * h * w, rows + 3 * h * w, rows + 4 * h * w,
                                 rows + 5 * h * w, work.values.data() + q * h * 2 * rh,
                                 work.scalars.data() + q * h * n_scalar},
                     wide.get());
    }
    // the gradients of each pair's scalars and values, head by head
    group_softmax(k, a, work);
    for (int64_t hd = 0; hd < h; ++hd) {
      const T* g_node = d.g_summed + (g * 2 * h + hd) * rh;  // g_summed [g, 2, h, rh], as summed
      std::copy(g_node, g_node + rh, g_summed.begin());
      std::copy(g_node + h * rh, g_node + (h + 1) * rh, g_summed.begin() + rh);
      T mean = 0;  // the softmax's backward: g_logit = alpha (g_alpha - sum alpha g_alpha)
      for (int64_t q = 0; q < k; ++q) {
        const int64_t slot = q * h + hd, row = (first + q) * h + hd;
        const T* values = work.values.data() + slot * 2 * rh;
        const T* scalars = work.scalars.data() + slot * n_scalar;
        T sum = dot(g_summed.data(), values, 2 * rh);
        for (int64_t c = 0; c < C; ++c) sum += d.g_alpha_weight[row * C + c] * scalars[2 + c];
        g_alpha[slot] = sum;
        mean += work.weights[slot] * sum;
      }
      for (int64_t q = 0; q < k; ++q) {
        const int64_t slot = q * h + hd, row = (first + q) * h + hd;
        const T alpha = work.weights[slot];
        T* g_s = g_scalars.data() + slot * n_scalar;
        g_s[0] = alpha * (g_alpha[slot] - mean);
        g_s[1] = d.g_block_sum[g * h + hd];
        for (int64_t c = 0; c < C; ++c) g_s[2 + c] = alpha * d.g_alpha_weight[row * C + c];
        for (int64_t j = 0; j < 2 * rh; ++j) g_values[slot * 2 * rh + j] = alpha * g_summed[j];
      }
    }
    // then each pair's MLPs backwards, all heads at once
    T* g_receiver = d.g_receiver + g * h * rh;
    for (int64_t j = 0; j < h * rh; ++j) g_receiver[j] = 0;
    for (int64_t q = 0; q < k; ++q) {
      const int64_t p = first + q;
      T* g_sender = d.g_sender + (a.sender_index ? a.sender_index[p] : p) * h * w;
      T* g_features = d.g_radial ? d.g_radial + p * h * nr : g_radial.data();
      pair_all_heads_backward(a, d, g_scalars.data() + q * h * n_scalar, g_values.data() + q * h * 2 * rh,
                              features[q], work.rows.data() + q * h * 6 * w, work.work.data(),
                              g_sender, g_receiver, g_features, wide.get(), wide_grads.get());
      if (d.g_distance) {  // head hd's features: channel c's basis functions hd R/h ... in columns c R/h ...
        const int64_t per_head = a.n_rbf / h;
        const T* s_row = slope.data() + q * h * nr;
        if (C == 1) {  // the features of one channel are consecutive
          d.g_distance[p] = dot(g_features, s_row, h * nr);
        } else {
          for (int64_t c = 0; c < C; ++c) {
            T part[8] = {};
            for (int64_t hd = 0; hd < h; ++hd)
              dot_parts(g_features + hd * nr + c * per_head, s_row + hd * nr + c * per_head, per_head, part);
            d.g_distance[p * C + c] = sum_parts(part);
          }
        }
      }
    }
  }
#ifdef GEOMOL_PAIR_HEADS_WIDE
  if constexpr (std::is_same_v<T, float>)
    if (wide_grads) wide_grads->unfold(d.g_w3, d.g_b3, d.g_b2, d.g_w2, d.g_w_rbf);
#endif
}

template <typename T>
int check(const Args<T>& a) {
  if (a.h < 1 || a.nr < 1 || a.rh < 1 || a.C < 1 || a.group_begin < 0 || a.group_end < a.group_begin) return 1;
  if (!a.radial && (!a.distance || a.n_rbf % a.h || a.C * a.n_rbf / a.h != a.nr)) return 1;
  for (int64_t g = a.group_begin; g < a.group_end; ++g)
    if (a.group_start[g + 1] <= a.group_start[g]) return 2;  // every group has at least one pair
  return 0;
}

}  // namespace

#define GEOMOL_ARGS(T)                                                                                          \
  int64_t group_begin, int64_t group_end, const int64_t *group_start, int64_t h, int64_t nr, int64_t rh,       \
      int64_t C, int64_t n_rbf, int64_t envelope_p, const T *radial, const T *distance, const T *rbf_offset,   \
      const T *rbf, const T *sender, const int64_t *sender_index, const T *receiver, const T *w_rbf_t,         \
      const T *w2_t, const T *b2, const T *w3, const T *b3, T *summed, T *block_sum, T *alpha_weight, T *pre1, \
      T *act1, T *pre2, T *hidden, T *scalars, T *alpha
#define GEOMOL_ARGS_VALUE(T)                                                                                   \
  Args<T> {                                                                                                    \
    group_begin, group_end, group_start, h, nr, rh, C, n_rbf, envelope_p, radial, distance, rbf_offset, rbf,   \
        sender, sender_index, receiver, w_rbf_t, w2_t, b2, w3, b3, summed, block_sum, alpha_weight, pre1, act1, \
        pre2, hidden, scalars, alpha                                                                           \
  }

// Forward: returns 0, or 1 for invalid sizes, 2 for an empty group.
#define GEOMOL_FORWARD(NAME, T)                   \
  extern "C" int NAME(GEOMOL_ARGS(T)) {           \
    const Args<T> a = GEOMOL_ARGS_VALUE(T);       \
    if (const int status = check(a)) return status; \
    attend_pairs(a);                              \
    return 0;                                     \
  }

// Backward: the forward arguments (outputs unused, may be null), then the gradients (see Grads).
#define GEOMOL_BACKWARD(NAME, T)                                                                            \
  extern "C" int NAME(GEOMOL_ARGS(T), const T *w_rbf, const T *w2_n, const T *g_summed, const T *g_block_sum, \
                      const T *g_alpha_weight, T *g_sender, T *g_receiver, T *g_radial, T *g_distance,       \
                      T *g_w_rbf, T *g_w2, T *g_b2, T *g_w3, T *g_b3) {                                       \
    const Args<T> a = GEOMOL_ARGS_VALUE(T);                                                                 \
    if (const int status = check(a)) return status;                                                         \
    attend_pairs_backward(a, Grads<T>{w_rbf, w2_n, g_summed, g_block_sum, g_alpha_weight, g_sender,          \
                                      g_receiver, g_radial, g_distance, g_w_rbf, g_w2, g_b2, g_w3, g_b3});  \
    return 0;                                                                                               \
  }

// 1 where the 16-float loops (pair_heads_wide.h) are compiled in, else 0.
extern "C" int geomol_attend_pairs_wide() {
#ifdef GEOMOL_PAIR_HEADS_WIDE
  return 1;
#else
  return 0;
#endif
}

GEOMOL_FORWARD(geomol_attend_pairs_f32, float)
GEOMOL_FORWARD(geomol_attend_pairs_f64, double)
GEOMOL_BACKWARD(geomol_attend_pairs_backward_f32, float)
GEOMOL_BACKWARD(geomol_attend_pairs_backward_f64, double)

GEOMOL_PACKED(geomol_attend_pairs_f32)
GEOMOL_PACKED(geomol_attend_pairs_backward_f32)
GEOMOL_PACKED(geomol_attend_pairs_f64)
GEOMOL_PACKED(geomol_attend_pairs_backward_f64)

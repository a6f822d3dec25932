// The per-pair stage of GET's bilevel attention in one pass (geomol/nn/native.py builds and calls it).
//
// For every group (a receiving atom i and a block edge e; its pairs are consecutive, group_start[g] to
// group_start[g + 1]), every pair of it and every head, the three pair MLPs run on a few registers' worth of data:
//
//   pre1   = sender[s] + [receiver[g], 0, 0] + W_rbf radial          (3rh: attention, message, coordinate)
//   pre2   = blockdiag(W2_a, W2_m, W2_c) SiLU(pre1) + b2
//   hidden = SiLU(pre2);  scalars = W3 hidden + b3                    (2 + C: atom logit, block logit, w_c)
//
// then the softmax of the atom logits within the group gives alpha, and the group's outputs are
// summed[g] = sum_pairs alpha * hidden[rh:3rh], block_sum[g] = sum_pairs scalars[1] and, per pair,
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
// Outputs: summed [g, h, 2rh], block_sum [g, h], alpha_weight [p, h, C]; optional (null: not written)
// pre1, act1, pre2, hidden [p, h, 3rh], scalars [p, h, 2 + C], alpha [p, h].
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace {

// e^x in float32 without a library call, so that loops over it vectorise: x = k ln2 + r with |r| <= ln2 / 2,
// e^r from its Taylor polynomial of degree 7 (truncation error below 1e-8 relative), 2^k from the exponent
// bits. k is rounded by adding and subtracting 1.5 * 2^23 (std::floor would keep the loop scalar); arguments
// are clamped to [-87, 88], so results stay normal floats.
inline float exp_approx(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (x - k * 0.693359375f) + k * 2.12194440e-4f;  // ln2 split in two for an exact k ln2
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline double exp_approx(double x) { return std::exp(x); }  // float64: the exact function (checks, not speed)

template <typename T>
inline T silu(T x) { return x / (T(1) + exp_approx(-x)); }

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

// The basis values of one distance d into out[R] (geomol.nn.radial.RadialBasis.forward).
template <typename T>
inline void radial_basis(T d, const Args<T>& a, T* __restrict__ out) {
  const T* rbf = a.rbf;  // inv_cutoff, gamma, a, b, c, min_exponent, flush_below
  const T x = d * rbf[0];
  T envelope = 0;
  if (x < T(1)) {
    T xp = 1;
    for (int64_t i = 0; i < a.envelope_p; ++i) xp *= x;
    envelope = T(1) + xp * (rbf[2] + x * (rbf[3] + rbf[4] * x));
  }
  for (int64_t m = 0; m < a.n_rbf; ++m) {
    const T diff = x - a.rbf_offset[m];
    const T value = exp_approx(std::max(diff * diff * rbf[1], rbf[5])) * envelope;
    out[m] = value > rbf[6] ? value : T(0);
  }
}

// One pair and head: the three pair MLPs and the scalar read-outs.
template <typename T>
inline void pair_mlps(const T* __restrict__ sender, const T* __restrict__ receiver, const T* __restrict__ radial,
                      const Args<T>& a, T* __restrict__ pre1, T* __restrict__ act1, T* __restrict__ pre2,
                      T* __restrict__ hidden, T* __restrict__ scalars) {
  const int64_t rh = a.rh, nr = a.nr, w = 3 * rh;
  for (int64_t j = 0; j < w; ++j) pre1[j] = sender[j];
  for (int64_t j = 0; j < rh; ++j) pre1[j] += receiver[j];
  for (int64_t m = 0; m < nr; ++m)
    for (int64_t j = 0; j < w; ++j) pre1[j] += a.w_rbf_t[m * w + j] * radial[m];
  for (int64_t j = 0; j < w; ++j) act1[j] = silu(pre1[j]);
  for (int64_t j = 0; j < w; ++j) pre2[j] = a.b2[j];
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t m = 0; m < rh; ++m)
      for (int64_t i = 0; i < rh; ++i) pre2[b * rh + i] += a.w2_t[(b * rh + m) * rh + i] * act1[b * rh + m];
  for (int64_t j = 0; j < w; ++j) hidden[j] = silu(pre2[j]);
  for (int64_t c = 0; c < 2 + a.C; ++c) {
    T sum = 0;
    for (int64_t j = 0; j < w; ++j) sum += a.w3[c * w + j] * hidden[j];
    scalars[c] = sum + a.b3[c];
  }
}

// The common configuration (float32, rh = 8: one 8-float vector per MLP) with GCC/Clang vector types, so that
// every step is a vector instruction whatever the compiler's auto-vectoriser decides.
typedef float v8 __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store8(float* p, v8 v) { std::memcpy(p, &v, sizeof v); }

inline v8 exp8(v8 x) {  // exp_approx on 8 lanes
  x = x < -87.0f ? -87.0f + 0.0f * x : x;
  x = x > 88.0f ? 88.0f + 0.0f * x : x;
  const v8 k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const v8 r = (x - k * 0.693359375f) + k * 2.12194440e-4f;
  v8 p = r * (1.0f / 5040.0f) + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const v8i bits = (__builtin_convertvector(k, v8i) + 127) << 23;
  v8 scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline v8 silu8(v8 x) { return x / (1.0f + exp8(-x)); }

inline float sum8(v8 v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

// NH heads of one pair at once (rh = nr = 8): NH independent chains of dependent vector operations, so that the
// processor overlaps them (one head alone is a ~200-cycle chain of latencies). Rows of consecutive heads are
// consecutive in every [p, h, .] tensor; kept tensors (null: not written) point at the first head's row.
template <int NH>
inline void pair_heads8(const float* __restrict__ sender, const float* __restrict__ receiver,
                        const float* __restrict__ radial, const Args<float>& a, float* __restrict__ pre1,
                        float* __restrict__ act1, float* __restrict__ pre2, float* __restrict__ hidden,
                        float* __restrict__ values, float* __restrict__ scalars) {
  const int64_t n_scalar = 2 + a.C;
  v8 x[NH][3], y[NH][3];
  for (int n = 0; n < NH; ++n) {
    for (int b = 0; b < 3; ++b) x[n][b] = load8(sender + 24 * n + 8 * b);
    x[n][0] += load8(receiver + 8 * n);
  }
  for (int m = 0; m < 8; ++m)
    for (int b = 0; b < 3; ++b) {
      const v8 column = load8(a.w_rbf_t + m * 24 + 8 * b);
      for (int n = 0; n < NH; ++n) x[n][b] += column * radial[8 * n + m];
    }
  for (int b = 0; b < 3; ++b) {
    v8 act[NH];
    for (int n = 0; n < NH; ++n) {
      if (pre1) store8(pre1 + 24 * n + 8 * b, x[n][b]);
      act[n] = silu8(x[n][b]);
      if (act1) store8(act1 + 24 * n + 8 * b, act[n]);
      y[n][b] = load8(a.b2 + 8 * b);
    }
    for (int m = 0; m < 8; ++m) {
      const v8 column = load8(a.w2_t + (8 * b + m) * 8);
      for (int n = 0; n < NH; ++n) y[n][b] += column * act[n][m];
    }
    for (int n = 0; n < NH; ++n) {
      if (pre2) store8(pre2 + 24 * n + 8 * b, y[n][b]);
      y[n][b] = silu8(y[n][b]);
      if (hidden) store8(hidden + 24 * n + 8 * b, y[n][b]);
      if (b > 0) store8(values + 16 * n + 8 * (b - 1), y[n][b]);
    }
  }
  for (int64_t c = 0; c < n_scalar; ++c) {
    const float* w3 = a.w3 + c * 24;
    const v8 w0 = load8(w3), w1 = load8(w3 + 8), w2 = load8(w3 + 16);
    for (int n = 0; n < NH; ++n) scalars[n * n_scalar + c] = sum8(w0 * y[n][0] + w1 * y[n][1] + w2 * y[n][2]) + a.b3[c];
  }
}

template <typename T>
inline T* row_of(T* base, int64_t row, int64_t width) { return base ? base + row * width : nullptr; }

// The pair MLPs of all h heads of pair p (sending row s) in group g: values [h, 2rh], scalars [h, 2 + C].
template <typename T>
inline void pair_all_heads_generic(int64_t p, int64_t s, int64_t g, const T* radial, const Args<T>& a, T* work,
                                   T* values, T* scalars) {
  const int64_t h = a.h, rh = a.rh, nr = a.nr, w = 3 * rh, n_scalar = 2 + a.C;
  for (int64_t hd = 0; hd < h; ++hd) {
    const int64_t row = p * h + hd;
    T* pre1 = a.pre1 ? a.pre1 + row * w : work;
    T* act1 = a.act1 ? a.act1 + row * w : work + w;
    T* pre2 = a.pre2 ? a.pre2 + row * w : work + 2 * w;
    T* hidden = a.hidden ? a.hidden + row * w : work + 3 * w;
    pair_mlps(a.sender + (s * h + hd) * w, a.receiver + (g * h + hd) * rh, radial + hd * nr, a, pre1, act1, pre2,
              hidden, scalars + hd * n_scalar);
    std::memcpy(values + hd * 2 * rh, hidden + rh, 2 * rh * sizeof(T));
  }
}

template <typename T>
inline void pair_all_heads(int64_t p, int64_t s, int64_t g, const T* radial, const Args<T>& a, T* work, T* values,
                           T* scalars) {
  pair_all_heads_generic(p, s, g, radial, a, work, values, scalars);
}

template <>
inline void pair_all_heads<float>(int64_t p, int64_t s, int64_t g, const float* radial, const Args<float>& a,
                                  float* work, float* values, float* scalars) {
  if (a.rh != 8 || a.nr != 8) {
    pair_all_heads_generic(p, s, g, radial, a, work, values, scalars);
    return;
  }
  const int64_t h = a.h, n_scalar = 2 + a.C;
  int64_t hd = 0;
  for (; hd + 4 <= h; hd += 4)
    pair_heads8<4>(a.sender + (s * h + hd) * 24, a.receiver + (g * h + hd) * 8, radial + hd * 8, a,
                   row_of(a.pre1, p * h + hd, 24), row_of(a.act1, p * h + hd, 24), row_of(a.pre2, p * h + hd, 24),
                   row_of(a.hidden, p * h + hd, 24), values + hd * 16, scalars + hd * n_scalar);
  for (; hd < h; ++hd)
    pair_heads8<1>(a.sender + (s * h + hd) * 24, a.receiver + (g * h + hd) * 8, radial + hd * 8, a,
                   row_of(a.pre1, p * h + hd, 24), row_of(a.act1, p * h + hd, 24), row_of(a.pre2, p * h + hd, 24),
                   row_of(a.hidden, p * h + hd, 24), values + hd * 16, scalars + hd * n_scalar);
}

template <typename T>
void attend_pairs(const Args<T>& a) {
  const int64_t h = a.h, C = a.C, rh = a.rh, nr = a.nr, w = 3 * rh, n_scalar = 2 + C, per_head = a.n_rbf / h;
  int64_t max_k = 1;
  for (int64_t g = a.group_begin; g < a.group_end; ++g)
    max_k = std::max(max_k, a.group_start[g + 1] - a.group_start[g]);
  // per pair q of the current group, per head: hidden[rh:] [2rh] and scalars [2 + C]
  std::vector<T> values(max_k * h * 2 * rh), scalars(max_k * h * n_scalar), weights(max_k);
  std::vector<T> work(4 * w), basis(C * a.n_rbf), radial(h * nr), block(h);
  for (int64_t g = a.group_begin; g < a.group_end; ++g) {
    const int64_t first = a.group_start[g], k = a.group_start[g + 1] - first;
    for (int64_t q = 0; q < k; ++q) {
      const int64_t p = first + q;
      const T* pair_radial = a.radial ? a.radial + p * h * nr : radial.data();
      if (!a.radial) {  // [C, R] basis -> [h, C, R / h]
        for (int64_t c = 0; c < C; ++c) radial_basis(a.distance[p * C + c], a, basis.data() + c * a.n_rbf);
        for (int64_t hd = 0; hd < h; ++hd)
          for (int64_t c = 0; c < C; ++c)
            std::memcpy(radial.data() + (hd * C + c) * per_head, basis.data() + c * a.n_rbf + hd * per_head,
                        per_head * sizeof(T));
      }
      pair_all_heads(p, a.sender_index ? a.sender_index[p] : p, g, pair_radial, a, work.data(),
                     values.data() + q * h * 2 * rh, scalars.data() + q * h * n_scalar);
      if (a.scalars) std::memcpy(a.scalars + p * h * n_scalar, scalars.data() + q * h * n_scalar,
                                 h * n_scalar * sizeof(T));
    }
    for (int64_t hd = 0; hd < h; ++hd) {  // softmax over the group's pairs, then the sums
      T top = -std::numeric_limits<T>::infinity(), total = 0, block = 0;
      for (int64_t q = 0; q < k; ++q) top = std::max(top, scalars[(q * h + hd) * n_scalar]);
      for (int64_t q = 0; q < k; ++q) {
        const T* row = scalars.data() + (q * h + hd) * n_scalar;
        total += (weights[q] = exp_approx(row[0] - top));
        block += row[1];
      }
      T* summed = a.summed + (g * h + hd) * 2 * rh;
      for (int64_t j = 0; j < 2 * rh; ++j) summed[j] = 0;
      for (int64_t q = 0; q < k; ++q) {
        const int64_t row = (first + q) * h + hd, slot = q * h + hd;
        const T alpha = weights[q] / total;
        const T* v = values.data() + slot * 2 * rh;
        for (int64_t j = 0; j < 2 * rh; ++j) summed[j] += alpha * v[j];
        for (int64_t c = 0; c < C; ++c) a.alpha_weight[row * C + c] = alpha * scalars[slot * n_scalar + 2 + c];
        if (a.alpha) a.alpha[row] = alpha;
      }
      a.block_sum[g * h + hd] = block;
    }
  }
}

template <typename T>
int entry(const Args<T>& a) {
  if (a.h < 1 || a.nr < 1 || a.rh < 1 || a.C < 1 || a.group_begin < 0 || a.group_end < a.group_begin) return 1;
  if (!a.radial && (!a.distance || a.n_rbf % a.h || a.C * a.n_rbf / a.h != a.nr)) return 1;
  for (int64_t g = a.group_begin; g < a.group_end; ++g)
    if (a.group_start[g + 1] <= a.group_start[g]) return 2;  // every group has at least one pair
  attend_pairs(a);
  return 0;
}

}  // namespace

#define GEOMOL_ATTEND_PAIRS(NAME, T)                                                                           \
  extern "C" int NAME(int64_t group_begin, int64_t group_end, const int64_t* group_start, int64_t h,             \
                      int64_t nr, int64_t rh, int64_t C, int64_t n_rbf, int64_t envelope_p, const T* radial,     \
                      const T* distance, const T* rbf_offset, const T* rbf, const T* sender,                     \
                      const int64_t* sender_index, const T* receiver, const T* w_rbf_t, const T* w2_t,           \
                      const T* b2, const T* w3, const T* b3, T* summed, T* block_sum, T* alpha_weight, T* pre1,  \
                      T* act1, T* pre2, T* hidden, T* scalars, T* alpha) {                                       \
    return entry<T>(Args<T>{group_begin, group_end, group_start, h, nr, rh, C, n_rbf, envelope_p, radial,        \
                            distance, rbf_offset, rbf, sender, sender_index, receiver, w_rbf_t, w2_t, b2, w3,    \
                            b3, summed, block_sum, alpha_weight, pre1, act1, pre2, hidden, scalars, alpha});     \
  }

GEOMOL_ATTEND_PAIRS(geomol_attend_pairs_f32, float)
GEOMOL_ATTEND_PAIRS(geomol_attend_pairs_f64, double)

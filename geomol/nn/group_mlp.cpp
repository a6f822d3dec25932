// GET's two group MLPs, y = SiLU(W2 SiLU(W1 x + b1) + b2) on the [g, K] group rows of a chunk, forward and
// backward (geomol/nn/group_mlp.py drives these; bilevel_attention.py's _mlp2_forward/_mlp2_backward are the
// PyTorch formulation). With K = 32 inputs and 64 hidden units the products are thin: through BLAS each one is a
// separate sweep over fresh [g, 64] buffers, with the bias, SiLU and its gradient as further sweeps. Here blocks
// of R = 6 rows go through both layers with their accumulators in vector registers (six rows by up to four
// 64-byte vectors); only the outputs, and the two pre-activations a backward pass reads, are written. The
// backward pass does its per-row part the same way and leaves the weight gradients (sums over all rows) to BLAS.
//
// Layouts, row-major and contiguous except x and g_x, whose rows are ld_x apart: x [g, K]; w1t [K, D] and
// w2t [D, O] (the weights transposed); w1 [D, K] and w2 [O, D] (as nn.Linear stores them); b1 [D], b2 [O];
// y [g, O]; pre1 [g, D], pre2 [g, O] (forward: written when non-null; backward: read). Any K, D, O; the vector
// path covers widths in multiples of 16 floats, the rest is done lane by lane. Functions take a range of rows begin <= r < end and return 0, or 1 for invalid arguments.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "native_math.h"
#include "native_packed.h"

namespace {

using namespace geomol_native;

constexpr int R = 6;   // rows per block
constexpr int L = 16;  // floats per vector

// Columns o ... o + CV L - 1 of a full block of R rows: out[r][.] = bias + sum_k in[r][k] wt[k][.], with the
// R x CV accumulators in vector registers.
template <int CV>
void product_tile(const float* in, int64_t ld_in, int64_t K, const float* wt, int64_t O, const float* bias,
                  float* out, int64_t ld_out, int64_t o) {
  vec<L> acc[R][CV];
  for (int v = 0; v < CV; ++v) {
    const vec<L> b = bias ? load<L>(bias + o + v * L) : vec<L>{};
    for (int r = 0; r < R; ++r) acc[r][v] = b;
  }
  for (int64_t k = 0; k < K; ++k) {
    vec<L> w[CV];
    for (int v = 0; v < CV; ++v) w[v] = load<L>(wt + k * O + o + v * L);
    for (int r = 0; r < R; ++r) {
      const float a = in[r * ld_in + k];
      for (int v = 0; v < CV; ++v) acc[r][v] += a * w[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < CV; ++v) store<L>(out + r * ld_out + o + v * L, acc[r][v]);
}

// out[r][o] = bias[o] + sum_k in[r][k] wt[k][o] for r < rows (<= R), o < O; bias may be null; in rows are ld_in
// apart, out rows ld_out apart. For a narrow output (O < L) pass w, the weight untransposed ([O][K]): its columns
// are then dot products over k.
template <typename T>
void product(int rows, const T* in, int64_t ld_in, int64_t K, const T* wt, int64_t O, const T* bias, T* out,
             int64_t ld_out, const T* w = nullptr) {
  int64_t o = 0;
  if constexpr (std::is_same_v<T, float>) {
    if (rows == R) {  // full blocks: column tiles of four, then two vectors
      for (; o + 4 * L <= O; o += 4 * L) product_tile<4>(in, ld_in, K, wt, O, bias, out, ld_out, o);
      for (; o + 2 * L <= O; o += 2 * L) product_tile<2>(in, ld_in, K, wt, O, bias, out, ld_out, o);
    }
    for (; o + L <= O; o += L)
      for (int r = 0; r < rows; ++r) {
        vec<L> acc = bias ? load<L>(bias + o) : vec<L>{};
        for (int64_t k = 0; k < K; ++k) acc += in[r * ld_in + k] * load<L>(wt + k * O + o);
        store<L>(out + r * ld_out + o, acc);
      }
    if (w != nullptr && o < O && K % L == 0) {  // narrow columns: dot products of rows of in and of w
      for (int r = 0; r < rows; ++r)
        for (int64_t c = o; c < O; ++c) {
          vec<L> acc{};
          for (int64_t k = 0; k < K; k += L) acc += load<L>(in + r * ld_in + k) * load<L>(w + c * K + k);
          out[r * ld_out + c] = sum_lanes<L>(acc) + (bias ? bias[c] : 0.0f);
        }
      return;
    }
  }
  for (; o < O; ++o)  // the columns left, one at a time
    for (int r = 0; r < rows; ++r) {
      T acc = bias ? bias[o] : T(0);
      for (int64_t k = 0; k < K; ++k) acc += in[r * ld_in + k] * wt[k * O + o];
      out[r * ld_out + o] = acc;
    }
}

// SiLU of n values in place.
template <typename T>
void silu_in_place(int64_t n, T* x) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; i + L <= n; i += L) {
      const vec<L> v = load<L>(x + i);
      store<L>(x + i, v * sigmoid_lanes<L>(v));
    }
  }
  for (; i < n; ++i) x[i] *= sigmoid(x[i]);
}

// act[i] = SiLU(pre[i]) and slope[i] = SiLU'(pre[i]) for n values (one exponential each).
template <typename T>
void silu_and_slope(int64_t n, const T* pre, T* act, T* slope) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; i + L <= n; i += L) {
      const vec<L> v = load<L>(pre + i), s = sigmoid_lanes<L>(v);
      store<L>(act + i, v * s);
      store<L>(slope + i, silu_slope(v, s));
    }
  }
  for (; i < n; ++i) {
    const T s = sigmoid(pre[i]);
    act[i] = pre[i] * s;
    slope[i] = silu_slope(pre[i], s);
  }
}

// grad[i] *= SiLU'(pre[i]) for n values.
template <typename T>
void times_silu_slope(int64_t n, const T* pre, T* grad) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; i + L <= n; i += L) {
      const vec<L> v = load<L>(pre + i);
      store<L>(grad + i, load<L>(grad + i) * silu_slope(v, sigmoid_lanes<L>(v)));
    }
  }
  for (; i < n; ++i) grad[i] *= silu_slope(pre[i], sigmoid(pre[i]));
}

struct Sizes {
  int64_t begin, end, K, D, O, ld_x;  // ld_x: the distance between rows of x (forward) or of g_x (backward)
  bool valid() const { return begin >= 0 && end >= begin && K > 0 && D > 0 && O > 0 && ld_x >= K; }
};

template <typename T>
int mlp2_forward(const Sizes& n, const T* x, const T* w1t, const T* b1, const T* w2t, const T* w2, const T* b2, T* y,
                 T* pre1, T* pre2) {
  if (!n.valid() || !x || !w1t || !w2t || !w2 || !y) return 1;
  std::vector<T> hidden(R * n.D);
  for (int64_t r0 = n.begin; r0 < n.end; r0 += R) {
    const int rows = static_cast<int>(std::min<int64_t>(R, n.end - r0));
    product(rows, x + r0 * n.ld_x, n.ld_x, n.K, w1t, n.D, b1, hidden.data(), n.D);
    if (pre1) std::copy(hidden.begin(), hidden.begin() + rows * n.D, pre1 + r0 * n.D);
    silu_in_place<T>(rows * n.D, hidden.data());
    T* out = y + r0 * n.O;
    product(rows, hidden.data(), n.D, n.D, w2t, n.O, b2, out, n.O, w2);
    if (pre2) std::copy(out, out + rows * n.O, pre2 + r0 * n.O);
    silu_in_place<T>(rows * n.O, out);
  }
  return 0;
}

// The backward pass's per-row part: g2 = g_y SiLU'(pre2), act1 = SiLU(pre1), g1 = (g2 W2) SiLU'(pre1) and
// g_x = g1 W1, written out ([g, O], [g, D], [g, D], [g, K]); the weight gradients g2^T act1 and g1^T x are left to
// the caller (BLAS reduces over many rows well).
template <typename T>
int mlp2_backward(const Sizes& n, const T* pre1, const T* pre2, const T* w1, const T* w2, const T* g_y, T* g2,
                  T* act1, T* g1, T* g_x) {
  if (!n.valid() || !pre1 || !pre2 || !w1 || !w2 || !g_y || !g2 || !act1 || !g1 || !g_x) return 1;
  std::vector<T> slope1(R * n.D);
  for (int64_t r0 = n.begin; r0 < n.end; r0 += R) {
    const int rows = static_cast<int>(std::min<int64_t>(R, n.end - r0));
    T *g2_rows = g2 + r0 * n.O, *g1_rows = g1 + r0 * n.D;
    std::copy(g_y + r0 * n.O, g_y + (r0 + rows) * n.O, g2_rows);
    times_silu_slope<T>(rows * n.O, pre2 + r0 * n.O, g2_rows);
    silu_and_slope<T>(rows * n.D, pre1 + r0 * n.D, act1 + r0 * n.D, slope1.data());
    product(rows, g2_rows, n.O, n.O, w2, n.D, static_cast<const T*>(nullptr), g1_rows, n.D);  // g2 W2
    for (int64_t i = 0; i < rows * n.D; ++i) g1_rows[i] *= slope1[i];
    product(rows, g1_rows, n.D, n.D, w1, n.K, static_cast<const T*>(nullptr), g_x + r0 * n.ld_x, n.ld_x);  // g1 W1
  }
  return 0;
}

}  // namespace

#define GEOMOL_GROUP_MLP(SUFFIX, T)                                                                               \
  extern "C" int geomol_group_mlp_##SUFFIX(int64_t begin, int64_t end, int64_t K, int64_t D, int64_t O,         \
                                           const T* x, int64_t ld_x, const T* w1t, const T* b1, const T* w2t,   \
                                           const T* w2, const T* b2, T* y, T* pre1, T* pre2) {                  \
    return mlp2_forward<T>(Sizes{begin, end, K, D, O, ld_x}, x, w1t, b1, w2t, w2, b2, y, pre1, pre2);           \
  }                                                                                                             \
  GEOMOL_PACKED(geomol_group_mlp_##SUFFIX)                                                                      \
  extern "C" int geomol_group_mlp_backward_##SUFFIX(int64_t begin, int64_t end, int64_t K, int64_t D,           \
                                                    int64_t O, const T* pre1, const T* pre2, const T* w1,       \
                                                    const T* w2, const T* g_y, T* g2, T* act1, T* g1, T* g_x,   \
                                                    int64_t ld_x) {                                             \
    return mlp2_backward<T>(Sizes{begin, end, K, D, O, ld_x}, pre1, pre2, w1, w2, g_y, g2, act1, g1, g_x);      \
  }                                                                                                             \
  GEOMOL_PACKED(geomol_group_mlp_backward_##SUFFIX)

GEOMOL_GROUP_MLP(f32, float)
GEOMOL_GROUP_MLP(f64, double)

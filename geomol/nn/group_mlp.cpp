// GET's two group MLPs, y = SiLU(W2 SiLU(W1 x + b1) + b2) on the [g, K] group rows of a chunk, forward and
// backward (geomol/nn/group_mlp.py drives these; bilevel_attention.py's _mlp2_forward/_mlp2_backward are the
// PyTorch formulation). With K = 32 inputs and 64 hidden units the products are thin: through BLAS each one is a
// separate sweep over fresh [g, 64] buffers, with the bias, SiLU and its gradient as further sweeps. Here blocks
// of R = 6 rows go through both layers with their accumulators in vector registers (six rows by up to four
// 64-byte vectors); only the outputs, and the two pre-activations a backward pass reads, are written. The
// backward pass keeps a block's gradients in a small buffer and adds the block's share of the weight gradients
// (sums over all rows) straight away, its rows in registers: nothing per row but the input's gradient is written.
//
// Layouts, row-major and contiguous except x and g_x, whose rows are ld_x (ld_g_x) apart: x [g, K]; w1t [K, D]
// and w2t [D, O] (the weights transposed); w1 [D, K] and w2 [O, D] (as nn.Linear stores them); b1 [D], b2 [O];
// y [g, O]; pre1 [g, D], pre2 [g, O] (forward: written when non-null; backward: read, or recomputed when null);
// the weight gradients g_w1 [D, K], g_b1 [D], g_w2 [O, D], g_b2 [O] (backward: added into). Any K, D, O; the
// vector path covers widths in multiples of 16 floats, the rest is done lane by lane. Functions take a range of
// rows begin <= r < end and return 0, or 1 for invalid arguments.
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

// Columns d0 ... d0 + CV L - 1 of acc[o][d] += sum over the R rows r of g[r][o] a[r][d], for every o < O: the
// block's rows of a in R x CV vector registers, one row of acc at a time.
template <int CV>
void outer_tile(const float* g, int64_t ld_g, int64_t O, const float* a, int64_t ld_a, float* acc, int64_t D,
                int64_t d0) {
  vec<L> rows[R][CV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < CV; ++v) rows[r][v] = load<L>(a + r * ld_a + d0 + v * L);
  for (int64_t o = 0; o < O; ++o) {
    vec<L> sum[CV];
    for (int v = 0; v < CV; ++v) sum[v] = load<L>(acc + o * D + d0 + v * L);
    for (int r = 0; r < R; ++r) {
      const float factor = g[r * ld_g + o];
      for (int v = 0; v < CV; ++v) sum[v] += factor * rows[r][v];
    }
    for (int v = 0; v < CV; ++v) store<L>(acc + o * D + d0 + v * L, sum[v]);
  }
}

// acc[o][d] += sum over r < rows (<= R) of g[r][o] a[r][d] ([O, D], a weight's gradient) and bias_acc[o] += sum
// over r of g[r][o] (its bias's gradient); g rows ld_g apart, a rows ld_a apart.
template <typename T>
void outer_add(int rows, const T* g, int64_t ld_g, int64_t O, const T* a, int64_t ld_a, int64_t D, T* acc,
               T* bias_acc) {
  int64_t d = 0, o = 0;
  if constexpr (std::is_same_v<T, float>) {
    if (rows == R) {
      for (; d + 4 * L <= D; d += 4 * L) outer_tile<4>(g, ld_g, O, a, ld_a, acc, D, d);
      for (; d + 2 * L <= D; d += 2 * L) outer_tile<2>(g, ld_g, O, a, ld_a, acc, D, d);
      for (; d + L <= D; d += L) outer_tile<1>(g, ld_g, O, a, ld_a, acc, D, d);
    }
    for (; o + L <= O; o += L) {
      vec<L> sum = load<L>(bias_acc + o);
      for (int r = 0; r < rows; ++r) sum += load<L>(g + r * ld_g + o);
      store<L>(bias_acc + o, sum);
    }
  }
  for (int r = 0; r < rows; ++r)
    for (int64_t c = o; c < O; ++c) bias_acc[c] += g[r * ld_g + c];
  if (d == D) return;
  for (int64_t row = 0; row < O; ++row)
    for (int r = 0; r < rows; ++r) {
      const T factor = g[r * ld_g + row];
      for (int64_t c = d; c < D; ++c) acc[row * D + c] += factor * a[r * ld_a + c];
    }
}

// The backward pass, block by block: g2 = g_y SiLU'(pre2), act1 = SiLU(pre1), g1 = (g2 W2) SiLU'(pre1) in a
// block's buffers, g_x = g1 W1 written out, and the weight gradients g2^T act1, g1^T x with the bias gradients (the
// column sums of g2 and g1) added into g_w2, g_w1, g_b2, g_b1. With pre1 and pre2 null, the block's pre-activations
// are recomputed from x (w1t, b1, w2t, b2 as in the forward pass) instead of read.
template <typename T>
int mlp2_backward(const Sizes& n, const T* x, int64_t ld_x, const T* w1t, const T* b1, const T* w2t, const T* b2,
                  const T* pre1, const T* pre2, const T* w1, const T* w2, const T* g_y, T* g_x, T* g_w1, T* g_b1,
                  T* g_w2, T* g_b2) {
  const bool recompute = pre1 == nullptr;
  if (!n.valid() || ld_x < n.K || !x || !w1 || !w2 || !g_y || !g_x || !g_w1 || !g_b1 || !g_w2 || !g_b2 ||
      (recompute ? (pre2 || !w1t || !w2t) : !pre2))
    return 1;
  std::vector<T> g2(R * n.O), act1(R * n.D), slope1(R * n.D), g1(R * n.D), kept1, kept2;
  if (recompute) kept1.resize(R * n.D), kept2.resize(R * n.O);
  for (int64_t r0 = n.begin; r0 < n.end; r0 += R) {
    const int rows = static_cast<int>(std::min<int64_t>(R, n.end - r0));
    const T *x_rows = x + r0 * ld_x, *p1 = recompute ? kept1.data() : pre1 + r0 * n.D;
    const T* p2 = recompute ? kept2.data() : pre2 + r0 * n.O;
    if (recompute) product(rows, x_rows, ld_x, n.K, w1t, n.D, b1, kept1.data(), n.D);
    silu_and_slope<T>(rows * n.D, p1, act1.data(), slope1.data());
    if (recompute) product(rows, act1.data(), n.D, n.D, w2t, n.O, b2, kept2.data(), n.O, w2);
    std::copy(g_y + r0 * n.O, g_y + (r0 + rows) * n.O, g2.data());
    times_silu_slope<T>(rows * n.O, p2, g2.data());
    product(rows, g2.data(), n.O, n.O, w2, n.D, static_cast<const T*>(nullptr), g1.data(), n.D);  // g2 W2
    for (int64_t i = 0; i < rows * n.D; ++i) g1[i] *= slope1[i];
    product(rows, g1.data(), n.D, n.D, w1, n.K, static_cast<const T*>(nullptr), g_x + r0 * n.ld_x, n.ld_x);  // g1 W1
    outer_add(rows, g2.data(), n.O, n.O, act1.data(), n.D, n.D, g_w2, g_b2);
    outer_add(rows, g1.data(), n.D, n.D, x_rows, ld_x, n.K, g_w1, g_b1);
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
  extern "C" int geomol_group_mlp_backward_##SUFFIX(                                                            \
      int64_t begin, int64_t end, int64_t K, int64_t D, int64_t O, const T* x, int64_t ld_x, const T* w1t,       \
      const T* b1, const T* w2t, const T* b2, const T* pre1, const T* pre2, const T* w1, const T* w2,            \
      const T* g_y, T* g_x, int64_t ld_g_x, T* g_w1, T* g_b1, T* g_w2, T* g_b2) {                                \
    return mlp2_backward<T>(Sizes{begin, end, K, D, O, ld_g_x}, x, ld_x, w1t, b1, w2t, b2, pre1, pre2, w1, w2,   \
                            g_y, g_x, g_w1, g_b1, g_w2, g_b2);                                                  \
  }                                                                                                             \
  GEOMOL_PACKED(geomol_group_mlp_backward_##SUFFIX)

GEOMOL_GROUP_MLP(f32, float)
GEOMOL_GROUP_MLP(f64, double)

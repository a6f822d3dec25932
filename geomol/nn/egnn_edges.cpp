// EGNO's EGNN edge MLPs, fused: a few edge rows at a time, everything from the gathers to the scatter-adds in
// registers and a small buffer (geomol/nn/native.py builds this; geomol/nn/egnn_compiled.py drives it and
// geomol/nn/egnn.py holds the PyTorch formulation of the same function).
//
// A row is one edge e (receiver i = row[e], sender j = col[e]) at one time slice p; H hidden channels:
//
//   r = x[i,p] - x[j,p],  s = |r|^2
//   act = SiLU(h_row[i,p] + h_col[j,p] + edge_term[e] + s w_s)
//   m = SiLU(W2 act + b2),  a3 = SiLU(Wc m + bc),  weight = wo . a3 + bo
//   agg[i,p] += m,  force[i,p] += r weight
//
// The backward pass recomputes this per block of rows (cheaper than storing six [rows, H] tensors and reading them
// back; given the two pre-activations a forward pass kept, it reads those and skips the two products) and runs the
// chain rule to every input: node terms, edge terms, positions and the weights (whose gradients, like the node
// gradients, are accumulated += into zero-initialised buffers, one set per thread).
//
// The products run on blocks of R rows with register-blocked loops (R rows by up to four 64-byte vectors of
// accumulators stay in vector registers); H must be NV vectors of 64 bytes (float32: 16, 32, 64 or 128 channels;
// float64: 8 ... 64).
// Layouts, row-major and contiguous: x [N, P, 3]; h_row, h_col, agg [N, P, H]; edge_term [M, H]; W2, Wc [H, H]
// as nn.Linear stores them and w2t, wct their transposes; wo [H]; bo, b2, bc as in nn.Linear.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "native_math.h"
#include "native_packed.h"

namespace {

using namespace geomol_native;

// 64 bytes of T as one vector (split into several instructions where registers are narrower).
template <typename T>
struct Pack {
  static constexpr int L = 64 / sizeof(T);
  typedef T V __attribute__((vector_size(64)));
  static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(T* p, V v) { std::memcpy(p, &v, sizeof v); }
  static T sum(V v) {
    T lanes[L];
    store(lanes, v);
    for (int width = L / 2; width > 0; width /= 2)
      for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
    return lanes[0];
  }
  static V sigmoid(V x) {
    if constexpr (std::is_same_v<T, float>) {
      return sigmoid_lanes<16>(x);
    } else {  // float64 (checks, not speed): the exact exponential, lane by lane
      T lanes[L];
      store(lanes, x);
      for (int l = 0; l < L; ++l) lanes[l] = T(1) / (T(1) + std::exp(-lanes[l]));
      return load(lanes);
    }
  }
};

// d SiLU(x) / dx from a = SiLU(x) and s = sigmoid(x): s + a (1 - s).
template <typename V>
inline V slope_of(V a, V s) { return s + a * (1 - s); }

template <typename T>
struct Weights {
  const T *w_s, *w2t, *b2, *wct, *bc, *wo, *bo, *w2, *wc;
};

// kept_z2, kept_z3 [rows, H] (null: not kept): the pre-activations of m and a3, written by a forward pass and read
// by the backward pass when stored (it then skips the two products of its recomputation).
template <typename T>
struct Graph {
  int64_t P;
  const T *x, *h_row, *h_col, *edge_term;
  const int64_t *row, *col;
  T *kept_z2, *kept_z3;
  bool stored;
};

template <typename T, int NV, int R>
struct EdgeBlock {
  using K = Pack<T>;
  using V = typename K::V;
  static constexpr int L = K::L, H = NV * L;

  // out[r] = wt^T in[r] + bias (bias null: 0), r < R: out[r][o] = sum_k in[r][k] wt[k][o]. in, out: [R][H].
  // Output columns go in tiles of up to four vectors, so that R x 4 accumulators stay in registers.
  static void product(const T* __restrict__ in, const T* __restrict__ wt, const T* __restrict__ bias,
                      T* __restrict__ out) {
    constexpr int CV = NV < 24 / R ? NV : 24 / R;
    for (int tile = 0; tile < NV; tile += CV) {
      V acc[R][CV];
      for (int v = 0; v < CV; ++v) {
        const V b = bias ? K::load(bias + (tile + v) * L) : V{};
        for (int r = 0; r < R; ++r) acc[r][v] = b;
      }
      for (int k = 0; k < H; ++k) {
        V w[CV];
        for (int v = 0; v < CV; ++v) w[v] = K::load(wt + k * H + (tile + v) * L);
        for (int r = 0; r < R; ++r) {
          const T a = in[r * H + k];
          for (int v = 0; v < CV; ++v) acc[r][v] += a * w[v];
        }
      }
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < CV; ++v) K::store(out + r * H + (tile + v) * L, acc[r][v]);
    }
  }

  // acc[o][:] += sum over r < R of g[r][o] a[r][:] (a weight's gradient). g, a: [R][H]; acc: [H][H].
  static void outer(const T* __restrict__ g, const T* __restrict__ a, T* __restrict__ acc) {
    for (int o = 0; o < H; ++o) {
      V sum[NV];
      for (int v = 0; v < NV; ++v) sum[v] = K::load(acc + o * H + v * L);
      for (int r = 0; r < R; ++r) {
        const T b = g[r * H + o];
        for (int v = 0; v < NV; ++v) sum[v] += b * K::load(a + r * H + v * L);
      }
      for (int v = 0; v < NV; ++v) K::store(acc + o * H + v * L, sum[v]);
    }
  }

  // out = wt^T in + bias for the rows q0 ... q0 + n - 1, or, where stored, those rows of kept (then rows n ... R - 1
  // of out are zero); a forward pass with kept not null writes the rows there.
  static void pre_activations(const T* in, const T* wt, const T* bias, T* out, T* kept, bool stored, int64_t q0,
                              int n) {
    if (kept && stored) {
      std::copy(kept + q0 * H, kept + (q0 + n) * H, out);
      std::fill(out + n * H, out + R * H, T(0));
      return;
    }
    product(in, wt, bias, out);
    if (kept) std::copy(out, out + n * H, kept + q0 * H);
  }

  // What the forward pass computes for the rows q0 ... q0 + n - 1 (n <= R); rows n ... R - 1 of the buffers are zero
  // inputs. With sigmoids (a backward pass), sig1/sig2/sig3 are kept too.
  struct Rows {
    alignas(64) T act[R * H], m[R * H], a3[R * H], sig1[R * H], sig2[R * H], sig3[R * H], z[R * H];
    T rs[R][4], weight[R];
    int64_t node_i[R], node_j[R], edge[R];
  };

  static void forward_rows(const Graph<T>& g, const Weights<T>& w, int64_t q0, int n, Rows& b, bool sigmoids) {
    const int64_t P = g.P;
    for (int r = 0; r < R; ++r) {
      T* act = b.act + r * H;
      if (r >= n) {
        std::fill(act, act + H, T(0));
        continue;
      }
      const int64_t q = q0 + r, e = q / P, p = q - e * P;
      b.edge[r] = e, b.node_i[r] = g.row[e] * P + p, b.node_j[r] = g.col[e] * P + p;
      const T *xi = g.x + b.node_i[r] * 3, *xj = g.x + b.node_j[r] * 3;
      T s = 0;
      for (int c = 0; c < 3; ++c) {
        b.rs[r][c] = xi[c] - xj[c];
        s += b.rs[r][c] * b.rs[r][c];
      }
      b.rs[r][3] = s;
      const T *hi = g.h_row + b.node_i[r] * H, *hj = g.h_col + b.node_j[r] * H, *et = g.edge_term + e * H;
      for (int v = 0; v < NV; ++v) {
        const int k = v * L;
        const V pre = K::load(hi + k) + K::load(hj + k) + K::load(et + k) + s * K::load(w.w_s + k);
        const V sig = K::sigmoid(pre);
        K::store(act + k, pre * sig);
        if (sigmoids) K::store(b.sig1 + r * H + k, sig);
      }
    }
    pre_activations(b.act, w.w2t, w.b2, b.z, g.kept_z2, g.stored, q0, n);
    for (int i = 0; i < R * H; i += L) {
      const V z = K::load(b.z + i), sig = K::sigmoid(z);
      K::store(b.m + i, z * sig);
      if (sigmoids) K::store(b.sig2 + i, sig);
    }
    pre_activations(b.m, w.wct, w.bc, b.z, g.kept_z3, g.stored, q0, n);
    for (int r = 0; r < n; ++r) {
      V total{};
      for (int v = 0; v < NV; ++v) {
        const int i = r * H + v * L;
        const V z = K::load(b.z + i), sig = K::sigmoid(z), a = z * sig;
        total += a * K::load(w.wo + v * L);
        if (sigmoids) K::store(b.a3 + i, a), K::store(b.sig3 + i, sig);
      }
      b.weight[r] = K::sum(total) + w.bo[0];
    }
  }

  static void forward(int64_t begin, int64_t end, const Graph<T>& g, const Weights<T>& w, T* agg, T* force) {
    Rows b;
    for (int64_t q0 = begin * g.P; q0 < end * g.P; q0 += R) {
      const int n = static_cast<int>(std::min<int64_t>(R, end * g.P - q0));
      forward_rows(g, w, q0, n, b, false);
      for (int r = 0; r < n; ++r) {
        T* a = agg + b.node_i[r] * H;
        for (int v = 0; v < NV; ++v) K::store(a + v * L, K::load(a + v * L) + K::load(b.m + r * H + v * L));
        for (int c = 0; c < 3; ++c) force[b.node_i[r] * 3 + c] += b.rs[r][c] * b.weight[r];
      }
    }
  }

  struct Grads {
    const T *g_force, *g_agg;
    T *g_h_row, *g_h_col, *g_x, *g_edge, *g_w_s, *g_w2, *g_b2, *g_wc, *g_bc, *g_wo, *g_bo;
  };

  static void backward(int64_t begin, int64_t end, const Graph<T>& g, const Weights<T>& w, const Grads& d) {
    Rows b;
    alignas(64) T g_z[R * H], g_in[R * H];
    for (int64_t q0 = begin * g.P; q0 < end * g.P; q0 += R) {
      const int n = static_cast<int>(std::min<int64_t>(R, end * g.P - q0));
      forward_rows(g, w, q0, n, b, true);
      T g_r[R][3];
      // force = r weight, weight = wo . a3 + bo, a3 = SiLU(z3)
      for (int r = 0; r < R; ++r) {
        if (r >= n) {
          std::fill(g_z + r * H, g_z + (r + 1) * H, T(0));
          continue;
        }
        const T* g_f = d.g_force + b.node_i[r] * 3;
        const T g_weight = g_f[0] * b.rs[r][0] + g_f[1] * b.rs[r][1] + g_f[2] * b.rs[r][2];
        for (int c = 0; c < 3; ++c) g_r[r][c] = g_f[c] * b.weight[r];
        d.g_bo[0] += g_weight;
        for (int v = 0; v < NV; ++v) {
          const int k = v * L, i = r * H + k;
          const V a = K::load(b.a3 + i);
          K::store(d.g_wo + k, K::load(d.g_wo + k) + a * g_weight);
          const V gz = slope_of(a, K::load(b.sig3 + i)) * (g_weight * K::load(w.wo + k));
          K::store(g_z + i, gz);
          K::store(d.g_bc + k, K::load(d.g_bc + k) + gz);
        }
      }
      outer(g_z, b.m, d.g_wc);
      product(g_z, w.wc, nullptr, g_in);  // gradient of m
      // m = SiLU(z2), z2 = W2 act + b2
      for (int r = 0; r < R; ++r) {
        if (r >= n) {
          std::fill(g_z + r * H, g_z + (r + 1) * H, T(0));
          continue;
        }
        const T* g_a = d.g_agg + b.node_i[r] * H;
        for (int v = 0; v < NV; ++v) {
          const int k = v * L, i = r * H + k;
          const V gz = slope_of(K::load(b.m + i), K::load(b.sig2 + i)) * (K::load(g_in + i) + K::load(g_a + k));
          K::store(g_z + i, gz);
          K::store(d.g_b2 + k, K::load(d.g_b2 + k) + gz);
        }
      }
      outer(g_z, b.act, d.g_w2);
      product(g_z, w.w2, nullptr, g_in);  // gradient of act
      // act = SiLU(pre), pre = h_row[i] + h_col[j] + edge_term[e] + s w_s
      for (int r = 0; r < n; ++r) {
        V along{};
        const T s = b.rs[r][3];
        T *gi = d.g_h_row + b.node_i[r] * H, *gj = d.g_h_col + b.node_j[r] * H;
        T* ge = d.g_edge ? d.g_edge + b.edge[r] * H : nullptr;
        for (int v = 0; v < NV; ++v) {
          const int k = v * L, i = r * H + k;
          const V gp = slope_of(K::load(b.act + i), K::load(b.sig1 + i)) * K::load(g_in + i);
          K::store(gi + k, K::load(gi + k) + gp);
          K::store(gj + k, K::load(gj + k) + gp);
          if (ge) K::store(ge + k, K::load(ge + k) + gp);
          K::store(d.g_w_s + k, K::load(d.g_w_s + k) + s * gp);
          along += gp * K::load(w.w_s + k);
        }
        const T t = 2 * K::sum(along);
        for (int c = 0; c < 3; ++c) {
          const T gr = g_r[r][c] + b.rs[r][c] * t;
          d.g_x[b.node_i[r] * 3 + c] += gr;
          d.g_x[b.node_j[r] * 3 + c] -= gr;
        }
      }
    }
  }
};

// Rows per block: the [R, 4] accumulators of a product's column tile fill about 24 registers.
template <int NV>
constexpr int rows_per_block() { return NV >= 4 ? 6 : 8; }

template <typename T, typename F>
int dispatch(int64_t H, F&& f) {
  constexpr int L = Pack<T>::L;
  switch (H / L * (H % L == 0)) {
    case 1: f(EdgeBlock<T, 1, rows_per_block<1>()>{}); return 0;
    case 2: f(EdgeBlock<T, 2, rows_per_block<2>()>{}); return 0;
    case 4: f(EdgeBlock<T, 4, rows_per_block<4>()>{}); return 0;
    case 8: f(EdgeBlock<T, 8, rows_per_block<8>()>{}); return 0;
    default: return 2;  // unsupported width
  }
}

}  // namespace

#define GEOMOL_EGNN_FUSED(SUFFIX, T)                                                                                 \
  extern "C" int geomol_egnn_fused_forward_##SUFFIX(                                                                \
      int64_t begin, int64_t end, int64_t P, int64_t H, const T* x, const T* h_row, const T* h_col,                 \
      const T* edge_term, const int64_t* row, const int64_t* col, const T* w_s, const T* w2t, const T* b2,           \
      const T* wct, const T* bc, const T* wo, const T* bo, T* agg, T* force, T* kept_z2, T* kept_z3) {               \
    if (P < 1 || begin < 0 || end < begin || (kept_z2 == nullptr) != (kept_z3 == nullptr)) return 1;              \
    const Graph<T> g{P, x, h_row, h_col, edge_term, row, col, kept_z2, kept_z3, false};                             \
    const Weights<T> w{w_s, w2t, b2, wct, bc, wo, bo, nullptr, nullptr};                                            \
    return dispatch<T>(H, [&](auto block) { decltype(block)::forward(begin, end, g, w, agg, force); });             \
  }                                                                                                                \
  extern "C" int geomol_egnn_fused_backward_##SUFFIX(                                                               \
      int64_t begin, int64_t end, int64_t P, int64_t H, const T* x, const T* h_row, const T* h_col,                 \
      const T* edge_term, const int64_t* row, const int64_t* col, const T* w_s, const T* w2t, const T* b2,           \
      const T* wct, const T* bc, const T* wo, const T* bo, const T* w2, const T* wc, const T* g_force,               \
      const T* g_agg, T* g_h_row, T* g_h_col, T* g_x, T* g_edge, T* g_w_s, T* g_w2, T* g_b2, T* g_wc, T* g_bc,      \
      T* g_wo, T* g_bo, T* kept_z2, T* kept_z3) {                                                                  \
    if (P < 1 || begin < 0 || end < begin || (kept_z2 == nullptr) != (kept_z3 == nullptr)) return 1;              \
    const Graph<T> g{P, x, h_row, h_col, edge_term, row, col, kept_z2, kept_z3, true};                              \
    const Weights<T> w{w_s, w2t, b2, wct, bc, wo, bo, w2, wc};                                                      \
    return dispatch<T>(H, [&](auto block) {                                                                         \
      using Block = decltype(block);                                                                               \
      const typename Block::Grads d{g_force, g_agg, g_h_row, g_h_col, g_x, g_edge, g_w_s, g_w2, g_b2, g_wc, g_bc,   \
                                    g_wo, g_bo};                                                                    \
      Block::backward(begin, end, g, w, d);                                                                        \
    });                                                                                                            \
  }

GEOMOL_EGNN_FUSED(f32, float)
GEOMOL_EGNN_FUSED(f64, double)

GEOMOL_PACKED(geomol_egnn_fused_forward_f32)
GEOMOL_PACKED(geomol_egnn_fused_backward_f32)
GEOMOL_PACKED(geomol_egnn_fused_forward_f64)
GEOMOL_PACKED(geomol_egnn_fused_backward_f64)

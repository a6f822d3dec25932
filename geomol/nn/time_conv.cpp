// The element-wise passes of EGNO's scalar temporal convolution, h' = h + LeakyReLU(S Mix(A h)), around its channel
// mixing (geomol/nn/time_conv.py drives these; geomol/nn/temporal.py holds the PyTorch formulation). Per node n and
// channel, A [J, P] takes the P slices to J real Fourier coefficients and S [P, J] takes them back; the mixing, a
// matrix product per mode, runs in BLAS between them. Through autograd each side is a permutation, a copy, a
// batched product and two or three more passes over fresh [N, P, C] tensors; here each is one pass over a node's
// rows, which stay in cache.
//
// Layouts, row-major and contiguous: h, out, g, g_h [N, P, C]; coef, g_coef [J, N, C]; mixed, g_mixed [J, N, C];
// A [J, P]; S [P, J]. Functions take a range of nodes begin <= n < end and return 0, or 1 for invalid sizes.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "native_packed.h"

namespace {

inline bool invalid(int64_t begin, int64_t end, int64_t P, int64_t C, int64_t J) {
  return begin < 0 || end < begin || P < 1 || C < 1 || J < 1;
}

// out[:C] = (init ? init[:C] : 0) + sum over i < count of weight[i * weight_step] rows[i * row_step :][:C]: one
// output row as a weighted sum of count input rows (the channel loops vectorise: nothing aliases out).
template <typename T>
inline void weighted_rows(int64_t C, int64_t count, const T* weight, int64_t weight_step, const T* rows,
                          int64_t row_step, const T* init, T* __restrict__ out) {
  for (int64_t c = 0; c < C; ++c) out[c] = init ? init[c] : T(0);
  for (int64_t i = 0; i < count; ++i) {
    const T w = weight[i * weight_step];
    const T* __restrict__ row = rows + i * row_step;
    for (int64_t c = 0; c < C; ++c) out[c] += w * row[c];
  }
}

// coef[j, n, :] = sum over s of A[j, s] h[n, s, :]
template <typename T>
int analysis(int64_t begin, int64_t end, int64_t N, int64_t P, int64_t C, int64_t J, const T* A, const T* h,
             T* coef) {
  if (invalid(begin, end, P, C, J)) return 1;
  for (int64_t n = begin; n < end; ++n)
    for (int64_t j = 0; j < J; ++j)
      weighted_rows<T>(C, P, A + j * P, 1, h + n * P * C, C, nullptr, coef + (j * N + n) * C);
  return 0;
}

// g_h[n, s, :] = g[n, s, :] + sum over j of A[j, s] g_coef[j, n, :] (the residual's and the analysis' gradients)
template <typename T>
int analysis_backward(int64_t begin, int64_t end, int64_t N, int64_t P, int64_t C, int64_t J, const T* A,
                      const T* g_coef, const T* g, T* g_h) {
  if (invalid(begin, end, P, C, J)) return 1;
  for (int64_t n = begin; n < end; ++n)
    for (int64_t s = 0; s < P; ++s)
      weighted_rows<T>(C, J, A + s, P, g_coef + n * C, N * C, g + (n * P + s) * C, g_h + (n * P + s) * C);
  return 0;
}

// out[n, t, :] = h[n, t, :] + LeakyReLU(sum over j of S[t, j] mixed[j, n, :]), negative slope `slope`
template <typename T>
int synthesis(int64_t begin, int64_t end, int64_t N, int64_t P, int64_t C, int64_t J, const T* S, const T* mixed,
              const T* h, const T* slope, T* out) {
  if (invalid(begin, end, P, C, J) || !slope) return 1;
  const T negative = *slope;
  for (int64_t n = begin; n < end; ++n)
    for (int64_t t = 0; t < P; ++t) {
      T* __restrict__ row = out + (n * P + t) * C;
      const T* in = h + (n * P + t) * C;
      weighted_rows<T>(C, J, S + t * J, 1, mixed + n * C, N * C, nullptr, row);
      for (int64_t c = 0; c < C; ++c) row[c] = in[c] + (row[c] > T(0) ? row[c] : negative * row[c]);
    }
  return 0;
}

// g_mixed[j, n, :] = sum over t of S[t, j] g[n, t, :] LeakyReLU'(pre[n, t, :]), pre recomputed from mixed as above
template <typename T>
int synthesis_backward(int64_t begin, int64_t end, int64_t N, int64_t P, int64_t C, int64_t J, const T* S,
                       const T* mixed, const T* slope, const T* g, T* g_mixed) {
  if (invalid(begin, end, P, C, J) || !slope) return 1;
  const T negative = *slope;
  std::vector<T> pre(C);  // one slice's pre-activation, then its gradient
  for (int64_t n = begin; n < end; ++n) {
    for (int64_t j = 0; j < J; ++j) std::fill(g_mixed + (j * N + n) * C, g_mixed + (j * N + n + 1) * C, T(0));
    for (int64_t t = 0; t < P; ++t) {
      T* __restrict__ slice = pre.data();
      const T* in = g + (n * P + t) * C;
      weighted_rows<T>(C, J, S + t * J, 1, mixed + n * C, N * C, nullptr, slice);
      for (int64_t c = 0; c < C; ++c) slice[c] = slice[c] > T(0) ? in[c] : negative * in[c];
      for (int64_t j = 0; j < J; ++j) {
        const T b = S[t * J + j];
        T* __restrict__ part = g_mixed + (j * N + n) * C;
        for (int64_t c = 0; c < C; ++c) part[c] += b * slice[c];
      }
    }
  }
  return 0;
}

}  // namespace

#define GEOMOL_TIME_CONV(SUFFIX, T)                                                                              \
  extern "C" int geomol_time_analysis_##SUFFIX(int64_t begin, int64_t end, int64_t N, int64_t P, int64_t C,    \
                                               int64_t J, const T* A, const T* h, T* coef) {                   \
    return analysis<T>(begin, end, N, P, C, J, A, h, coef);                                                    \
  }                                                                                                            \
  GEOMOL_PACKED(geomol_time_analysis_##SUFFIX)                                                                 \
  extern "C" int geomol_time_analysis_backward_##SUFFIX(int64_t begin, int64_t end, int64_t N, int64_t P,      \
                                                        int64_t C, int64_t J, const T* A, const T* g_coef,     \
                                                        const T* g, T* g_h) {                                  \
    return analysis_backward<T>(begin, end, N, P, C, J, A, g_coef, g, g_h);                                    \
  }                                                                                                            \
  GEOMOL_PACKED(geomol_time_analysis_backward_##SUFFIX)                                                        \
  extern "C" int geomol_time_synthesis_##SUFFIX(int64_t begin, int64_t end, int64_t N, int64_t P, int64_t C,   \
                                                int64_t J, const T* S, const T* mixed, const T* h,             \
                                                const T* slope, T* out) {                                      \
    return synthesis<T>(begin, end, N, P, C, J, S, mixed, h, slope, out);                                      \
  }                                                                                                            \
  GEOMOL_PACKED(geomol_time_synthesis_##SUFFIX)                                                                \
  extern "C" int geomol_time_synthesis_backward_##SUFFIX(int64_t begin, int64_t end, int64_t N, int64_t P,     \
                                                         int64_t C, int64_t J, const T* S, const T* mixed,     \
                                                         const T* slope, const T* g, T* g_mixed) {             \
    return synthesis_backward<T>(begin, end, N, P, C, J, S, mixed, slope, g, g_mixed);                         \
  }                                                                                                            \
  GEOMOL_PACKED(geomol_time_synthesis_backward_##SUFFIX)

GEOMOL_TIME_CONV(f32, float)
GEOMOL_TIME_CONV(f64, double)

// Arithmetic shared by geomol's compiled loops (attend_pairs.cpp, egnn_edges.cpp): an e^x that vectorises,
// the sigmoid and the SiLU's slope, and L-float vector types.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#if defined(__AVX512F__) || defined(__AVX512VL__)
#include <immintrin.h>
#endif

namespace geomol_native {

// e^x in float32 without a library call, so that loops over it vectorise: x = k ln2 + r with |r| <= ln2 / 2,
// e^r from a polynomial of degree 6 (fitted to e^r on Chebyshev nodes of that interval: 2.6e-9 relative error,
// below float32 rounding; the evaluation in float32 stays within 1e-7 of e^r), 2^k from the exponent bits. k is
// rounded by adding and subtracting 1.5 * 2^23 (std::floor would keep the loop scalar); arguments are clamped to
// [-87, 88], so results stay normal floats. V: float, or a vector of floats (exp_lanes below).
template <typename V>
inline V exp_of_reduced(V x, V& k) {  // e^r for x clamped; k: the power of two still to apply
  k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const V r = (x - k * 0.693359375f) + k * 2.12194440e-4f;  // ln2 split in two for an exact k ln2
  V p = r * 1.39485808e-3f + 8.37512889e-3f;
  p = p * r + 4.16662183e-2f;
  p = p * r + 1.66664155e-1f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  return p * r + 1.0f;
}

inline float exp_approx(float x) {
  float k;
  const float p = exp_of_reduced(std::min(std::max(x, -87.0f), 88.0f), k);
  const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline double exp_approx(double x) { return std::exp(x); }  // float64: the exact function (checks, not speed)

template <typename T>
inline T sigmoid(T x) { return T(1) / (T(1) + exp_approx(-x)); }

// Memory on 64-byte (cache-line) boundaries: a 64-byte vector load from a row of 16 floats then touches one line.
template <typename T>
struct LineAligned {
  using value_type = T;
  LineAligned() = default;
  template <typename U>
  LineAligned(const LineAligned<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <typename U>
  bool operator==(const LineAligned<U>&) const { return true; }
  template <typename U>
  bool operator!=(const LineAligned<U>&) const { return false; }
};

template <typename T>
using aligned_vector = std::vector<T, LineAligned<T>>;

// L floats as one GCC/Clang vector type, so that every step is a vector instruction whatever the compiler's
// auto-vectoriser decides (a type wider than the machine's registers is split into several).
template <int L>
struct Lanes {
  typedef float type __attribute__((vector_size(4 * L)));
  typedef int32_t integers __attribute__((vector_size(4 * L)));
};

template <int L>
using vec = typename Lanes<L>::type;

template <int L>
inline vec<L> load(const float* p) {
  vec<L> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <int L>
inline void store(float* p, vec<L> v) { std::memcpy(p, &v, sizeof v); }

template <int L>
inline void add_to(float* p, vec<L> v) { store<L>(p, load<L>(p) + v); }

// Three steps of exp_lanes and sigmoid_lanes, with the processor's instructions where it has them (AVX-512:
// one min/max each for the clamps, one scaling for 2^k, a 14-bit reciprocal estimate and a Newton step instead
// of a division, which would hold up every sigmoid: the divider takes 5-10 cycles per vector).
template <int L>
inline vec<L> clamp_lanes(vec<L> x, float low, float high) {  // NaN stays NaN
  x = x < low ? vec<L>{} + low : x;
  return x > high ? vec<L>{} + high : x;
}

template <int L>
inline vec<L> times_power_of_two(vec<L> p, vec<L> k) {  // p 2^k, k integral in [-126, 127]
  const typename Lanes<L>::integers bits = (__builtin_convertvector(k, typename Lanes<L>::integers) + 127) << 23;
  vec<L> scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

template <int L>
inline vec<L> reciprocal_lanes(vec<L> d) { return 1.0f / d; }

#if defined(__AVX512F__)
template <>
inline vec<16> clamp_lanes<16>(vec<16> x, float low, float high) {  // min/max return their second operand for NaN
  return (vec<16>)_mm512_min_ps(_mm512_set1_ps(high), _mm512_max_ps(_mm512_set1_ps(low), (__m512)x));
}

template <>
inline vec<16> times_power_of_two<16>(vec<16> p, vec<16> k) { return (vec<16>)_mm512_scalef_ps((__m512)p, (__m512)k); }

template <>
inline vec<16> reciprocal_lanes<16>(vec<16> d) {  // within two ulps of 1 / d
  const vec<16> r = (vec<16>)_mm512_rcp14_ps((__m512)d);
  return r + r * (1.0f - d * r);
}
#endif
#if defined(__AVX512VL__)
template <>
inline vec<8> clamp_lanes<8>(vec<8> x, float low, float high) {
  return (vec<8>)_mm256_min_ps(_mm256_set1_ps(high), _mm256_max_ps(_mm256_set1_ps(low), (__m256)x));
}

template <>
inline vec<8> times_power_of_two<8>(vec<8> p, vec<8> k) { return (vec<8>)_mm256_scalef_ps((__m256)p, (__m256)k); }

template <>
inline vec<8> reciprocal_lanes<8>(vec<8> d) {
  const vec<8> r = (vec<8>)_mm256_rcp14_ps((__m256)d);
  return r + r * (1.0f - d * r);
}
#endif

template <int L>
inline vec<L> exp_lanes(vec<L> x) {  // exp_approx on L lanes
  vec<L> k;
  const vec<L> p = exp_of_reduced(clamp_lanes<L>(x, -87.0f, 88.0f), k);
  return times_power_of_two<L>(p, k);
}

template <int L>
inline vec<L> sigmoid_lanes(vec<L> x) {  // 1 / (1 + e^-x) on L lanes
  return reciprocal_lanes<L>(1.0f + exp_lanes<L>(-x));
}

// SiLU on L lanes, x sigmoid(x); with Sigmoids, the sigmoid is also stored at ``sigmoid`` (for a backward pass).
template <int L, bool Sigmoids>
inline vec<L> silu_lanes(vec<L> x, float* sigmoid) {
  const vec<L> s = sigmoid_lanes<L>(x);
  if (Sigmoids) store<L>(sigmoid, s);
  return x * s;
}

template <int L>
inline float sum_lanes(vec<L> v) {  // pairwise: lanes l and l + L/2 first
  float lanes[L];
  store<L>(lanes, v);
  for (int width = L / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return lanes[0];
}

// a[j] b[j] for j < n added into part[j % 8]: eight independent sums, so that the loop vectorises (one sum
// would be a chain of n dependent additions); sum_parts adds them up.
template <typename T>
inline void dot_parts(const T* a, const T* b, int64_t n, T* part) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) part[l] += a[j + l] * b[j + l];
  for (int l = 0; j + l < n; ++l) part[l] += a[j + l] * b[j + l];
}

template <typename T>
inline T sum_parts(const T* part) {
  return ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
}

// sum_j a[j] b[j] through eight partial sums (dot_parts).
template <typename T>
inline T dot(const T* a, const T* b, int64_t n) {
  T part[8] = {};
  dot_parts(a, b, n, part);
  return sum_parts(part);
}

template <typename V>
inline V silu_slope(V x, V sig) {  // d SiLU / dx from x and sigmoid(x); V: a float type or a vector of floats
  return sig * (1.0f + x * (1.0f - sig));
}

inline double silu_slope(double x, double sig) { return sig * (1.0 + x * (1.0 - sig)); }

}  // namespace geomol_native

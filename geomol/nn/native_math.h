// Arithmetic shared by geomol's compiled loops (attend_pairs.cpp, egnn_edges.cpp): an e^x that vectorises,
// the sigmoid and the SiLU's slope, and L-float vector types.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace geomol_native {

// e^x in float32 without a library call, so that loops over it vectorise: x = k ln2 + r with |r| <= ln2 / 2,
// e^r from its Taylor polynomial of degree 7 (truncation error below 1e-8 relative), 2^k from the exponent
// bits. k is rounded by adding and subtracting 1.5 * 2^23 (std::floor would keep the loop scalar); arguments
// are clamped to [-87, 88], so results stay normal floats. V: float, or a vector of floats (exp_lanes below).
template <typename V>
inline V exp_of_reduced(V x, V& k) {  // e^r for x clamped; k: the power of two still to apply
  k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const V r = (x - k * 0.693359375f) + k * 2.12194440e-4f;  // ln2 split in two for an exact k ln2
  V p = r * (1.0f / 5040.0f) + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
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

template <int L>
inline vec<L> exp_lanes(vec<L> x) {  // exp_approx on L lanes
  const vec<L> low = vec<L>{} - 87.0f, high = vec<L>{} + 88.0f;
  x = x < low ? low : x;
  x = x > high ? high : x;
  vec<L> k;
  const vec<L> p = exp_of_reduced(x, k);
  const typename Lanes<L>::integers bits = (__builtin_convertvector(k, typename Lanes<L>::integers) + 127) << 23;
  vec<L> scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

template <int L>
inline vec<L> sigmoid_lanes(vec<L> x) {  // 1 / (1 + e^-x) on L lanes
  return 1.0f / (1.0f + exp_lanes<L>(-x));
}

template <int L>
inline float sum_lanes(vec<L> v) {  // pairwise: lanes l and l + L/2 first
  float lanes[L];
  store<L>(lanes, v);
  for (int width = L / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return lanes[0];
}

template <typename V>
inline V silu_slope(V x, V sig) {  // d SiLU / dx from x and sigmoid(x); V: a float type or a vector of floats
  return sig * (1.0f + x * (1.0f - sig));
}

inline double silu_slope(double x, double sig) { return sig * (1.0 + x * (1.0 - sig)); }

}  // namespace geomol_native

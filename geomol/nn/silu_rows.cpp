// Element-wise passes of the MLPs in geomol's hand-written backward passes (GET's feed-forward block and group
// MLPs), driven by geomol/nn/fused_silu.py: forward, the bias, the SiLU and inverted dropout in one pass over a
// product's output; backward, dropout and the SiLU's slope in one pass over the incoming gradient. torch runs these
// as three or four passes (a boolean mask is converted to floats first), and its SiLU costs several times the
// arithmetic (a libm-accurate exponential per element); here the exponential is exp_approx (native_math.h).
//
// Layouts: rows of n values, row r of a tensor at r · (its row stride), values contiguous within a row; bias [n];
// keep [rows, n] contiguous bytes 0/1 (a torch.bool mask); scale: one value, the factor of kept elements. bias and
// keep may be null (no bias, no dropout). Functions take a range begin ≤ row < end and return 0, or 1 for invalid
// arguments. geomol_keep_bits draws the masks themselves (geomol/nn/dropout.py), from a counter-based generator.
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "native_math.h"
#include "native_packed.h"

namespace {

using namespace geomol_native;

constexpr int L = 16;  // floats per vector step

template <typename T>
inline T dropout_factor(const uint8_t* keep, int64_t i, T scale) {
  return keep == nullptr ? T(1) : (keep[i] ? scale : T(0));
}

// scale or 0 per lane, from L mask bytes (compilers turn a generic byte-to-float conversion into scalar code)
inline vec<L> dropout_lanes(const uint8_t* keep, float scale) {
  vec<L> v;
#if defined(__AVX512F__)
  const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(keep))));
  std::memcpy(&v, &f, sizeof v);
#elif defined(__AVX2__)
  for (int half = 0; half < 2; ++half) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(keep + 8 * half));
    const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
    std::memcpy(reinterpret_cast<float*>(&v) + 8 * half, &f, sizeof f);
  }
#else
  for (int l = 0; l < L; ++l) v[l] = keep[l];
#endif
  return v * scale;
}

// One row of n: x += bias (when given: x then holds the pre-activation); out = dropout(act(x)), act the SiLU when
// silu, else the identity. out may be x.
template <typename T>
void forward_row(int64_t n, T* x, const T* bias, bool silu, const uint8_t* keep, T scale, T* out) {
  int64_t c = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; c + L <= n; c += L) {
      vec<L> v = load<L>(x + c);
      if (bias) {
        v += load<L>(bias + c);
        store<L>(x + c, v);
      }
      if (silu) v *= sigmoid_lanes<L>(v);
      if (keep) v *= dropout_lanes(keep + c, scale);
      store<L>(out + c, v);
    }
  }
  for (; c < n; ++c) {
    T v = x[c];
    if (bias) x[c] = v = v + bias[c];
    if (silu) v *= sigmoid(v);
    out[c] = v * dropout_factor(keep, c, scale);
  }
}

// One row of n: out = grad · dropout factor · SiLU'(pre) (pre null: no SiLU). out may be grad. With act non-null
// (and pre), also act = dropout(SiLU(pre)), the activation the next layer's weight gradient reads, from the same
// sigmoid.
template <typename T>
void backward_row(int64_t n, const T* grad, const T* pre, const uint8_t* keep, T scale, T* out, T* act) {
  int64_t c = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; c + L <= n; c += L) {
      const vec<L> factor = keep ? dropout_lanes(keep + c, scale) : vec<L>{} + 1.0f;
      vec<L> g = load<L>(grad + c) * factor;
      if (pre) {
        const vec<L> v = load<L>(pre + c), s = sigmoid_lanes<L>(v);
        g *= silu_slope(v, s);
        if (act) store<L>(act + c, v * s * factor);
      }
      store<L>(out + c, g);
    }
  }
  for (; c < n; ++c) {
    const T factor = dropout_factor(keep, c, scale);
    T g = grad[c] * factor;
    if (pre) {
      const T s = sigmoid(pre[c]);
      g *= silu_slope(pre[c], s);
      if (act) act[c] = pre[c] * s * factor;
    }
    out[c] = g;
  }
}

inline bool invalid(int64_t begin, int64_t end, int64_t n, const void* in, int64_t ld_in, const void* out,
                    int64_t ld_out, const uint8_t* keep, const void* scale) {
  return n < 0 || begin < 0 || end < begin || in == nullptr || out == nullptr || ld_in < n || ld_out < n ||
         (keep && scale == nullptr);
}

template <typename T>
int silu_rows(int64_t begin, int64_t end, int64_t n, T* x, int64_t ld_x, const T* bias, int64_t silu,
              const uint8_t* keep, const T* scale, T* out, int64_t ld_out) {
  if (invalid(begin, end, n, x, ld_x, out, ld_out, keep, scale)) return 1;
  const T factor = keep ? *scale : T(1);
  for (int64_t r = begin; r < end; ++r)
    forward_row(n, x + r * ld_x, bias, silu != 0, keep ? keep + r * n : nullptr, factor, out + r * ld_out);
  return 0;
}

template <typename T>
int silu_grad_rows(int64_t begin, int64_t end, int64_t n, const T* grad, int64_t ld_grad, const T* pre,
                   int64_t ld_pre, const uint8_t* keep, const T* scale, T* out, int64_t ld_out, T* act,
                   int64_t ld_act) {
  if (invalid(begin, end, n, grad, ld_grad, out, ld_out, keep, scale) || (pre && ld_pre < n) ||
      (act && (!pre || ld_act < n)))
    return 1;
  const T factor = keep ? *scale : T(1);
  for (int64_t r = begin; r < end; ++r)
    backward_row(n, grad + r * ld_grad, pre ? pre + r * ld_pre : nullptr, keep ? keep + r * n : nullptr, factor,
                 out + r * ld_out, act ? act + r * ld_act : nullptr);
  return 0;
}

// The dropout masks' random bits: SplitMix64's word w of the stream seeded by seed (a counter-based generator:
// the bits of any position are the same whichever range, or thread, computes them).
constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL, kMix1 = 0xbf58476d1ce4e5b9ULL, kMix2 = 0x94d049bb133111ebULL;

template <typename U>  // U: uint64_t or a vector of them
inline U splitmix_word(U seed_plus_w) {
  U z = seed_plus_w;
  z = (z ^ (z >> 30)) * kMix1;
  z = (z ^ (z >> 27)) * kMix2;
  return z ^ (z >> 31);
}

// keep[i] = 1 where the 15 low bits of draw i are >= threshold (probability 1 - threshold / 2^15), else 0, for
// begin <= i < end; draw i is 16-bit part i % 4 of word i / 4 (seed + (i / 4 + 1) * golden ratio, mixed).
int keep_bits(int64_t begin, int64_t end, uint64_t seed, int64_t threshold, uint8_t* keep) {
  if (begin < 0 || end < begin || threshold < 0 || threshold > (1 << 15) || !keep) return 1;
  const auto draw = [&](int64_t i) {
    const uint64_t word = splitmix_word(seed + (static_cast<uint64_t>(i >> 2) + 1) * kGolden);
    return static_cast<int64_t>((word >> (16 * (i & 3))) & 0x7fff);
  };
  int64_t i = begin;
  for (; i < end && (i & 31); ++i) keep[i] = draw(i) >= threshold;
  typedef uint64_t words __attribute__((vector_size(64)));   // 8 words: 32 draws
  typedef uint16_t draws __attribute__((vector_size(64)));
  typedef int8_t bytes __attribute__((vector_size(32)));
  const words offsets = {1, 2, 3, 4, 5, 6, 7, 8};
  const draws low_bits = draws{} + 0x7fff, limit = draws{} + static_cast<uint16_t>(threshold);
  for (; i + 32 <= end; i += 32) {
    const words w = splitmix_word(seed + (static_cast<uint64_t>(i >> 2) + offsets) * kGolden);
    draws d;
    std::memcpy(&d, &w, sizeof d);  // little-endian: draw 4 w + j is 16-bit lane 4 w + j
    const bytes kept = __builtin_convertvector((d & low_bits) >= limit, bytes) & 1;
    std::memcpy(keep + i, &kept, sizeof kept);
  }
  for (; i < end; ++i) keep[i] = draw(i) >= threshold;
  return 0;
}

}  // namespace

extern "C" int geomol_keep_bits(int64_t begin, int64_t end, int64_t seed, int64_t threshold, uint8_t* keep) {
  return keep_bits(begin, end, static_cast<uint64_t>(seed), threshold, keep);
}
GEOMOL_PACKED(geomol_keep_bits)

#define GEOMOL_SILU_ROWS(SUFFIX, T)                                                                              \
  extern "C" int geomol_silu_rows_##SUFFIX(int64_t begin, int64_t end, int64_t n, T* x, int64_t ld_x,         \
                                           const T* bias, int64_t silu, const uint8_t* keep, const T* scale,   \
                                           T* out, int64_t ld_out) {                                           \
    return silu_rows<T>(begin, end, n, x, ld_x, bias, silu, keep, scale, out, ld_out);                         \
  }                                                                                                            \
  GEOMOL_PACKED(geomol_silu_rows_##SUFFIX)                                                                     \
  extern "C" int geomol_silu_grad_rows_##SUFFIX(int64_t begin, int64_t end, int64_t n, const T* grad,          \
                                                int64_t ld_grad, const T* pre, int64_t ld_pre,                 \
                                                const uint8_t* keep, const T* scale, T* out, int64_t ld_out,   \
                                                T* act, int64_t ld_act) {                                      \
    return silu_grad_rows<T>(begin, end, n, grad, ld_grad, pre, ld_pre, keep, scale, out, ld_out, act, ld_act); \
  }                                                                                                            \
  GEOMOL_PACKED(geomol_silu_grad_rows_##SUFFIX)

GEOMOL_SILU_ROWS(f32, float)
GEOMOL_SILU_ROWS(f64, double)

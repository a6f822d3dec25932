// Distances between the atoms of blocks, for GET's block edges and atom pairs (geomol/nn/native.py builds and
// calls these; geomol.nn.block_edges and geomol.nn.atom_pairs hold the PyTorch formulations).
//
// Z [N, C, 3] coordinates, row-major. Blocks are runs of consecutive atoms: block b is atoms start[b] ...
// start[b] + length[b] - 1.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "native_packed.h"

namespace {

template <typename T>
inline T squared(const T* a, const T* b) {
  const T x = a[0] - b[0], y = a[1] - b[1], z = a[2] - b[2];
  return x * x + y * y + z * z;
}

// out[p] = min over the atoms i of block rows[p] and j of block cols[p] of min over channels of |Z_ic - Z_jc|.
template <typename T>
void block_min_distance(int64_t begin, int64_t end, const T* Z, int64_t C, const int64_t* start,
                        const int64_t* length, const int64_t* rows, const int64_t* cols, T* out) {
  for (int64_t p = begin; p < end; ++p) {
    const int64_t a0 = start[rows[p]], a1 = a0 + length[rows[p]], b0 = start[cols[p]], b1 = b0 + length[cols[p]];
    T best = std::numeric_limits<T>::infinity();
    for (int64_t i = a0; i < a1; ++i)
      for (int64_t j = b0; j < b1; ++j)
        for (int64_t c = 0; c < C; ++c) best = std::min(best, squared(Z + (i * C + c) * 3, Z + (j * C + c) * 3));
    out[p] = std::sqrt(best);
  }
}

// For every group g (atom group_atom[g] and the count[g] atoms first[g] ... of a sending block), the keep atoms of
// that block nearest to the atom (distance: sum over channels of the Euclidean distance), nearest first, ties to
// the lower index, into out[g, keep]; columns past count[g] get first[g] + column (the caller drops them).
template <typename T>
void nearest_atoms(int64_t begin, int64_t end, const T* Z, int64_t C, const int64_t* group_atom, const int64_t* first,
                   const int64_t* count, int64_t keep, int64_t* out) {
  constexpr int64_t kMaxKeep = 64;
  T best[kMaxKeep];
  for (int64_t g = begin; g < end; ++g) {
    const int64_t i = group_atom[g], j0 = first[g], n = count[g];
    int64_t* chosen = out + g * keep;
    int64_t found = 0;
    for (int64_t j = j0; j < j0 + n; ++j) {
      T d = 0;
      for (int64_t c = 0; c < C; ++c) d += std::sqrt(squared(Z + (i * C + c) * 3, Z + (j * C + c) * 3));
      if (found == keep && !(d < best[keep - 1])) continue;  // not nearer than the current k-th
      int64_t at = std::min(found, keep - 1);
      while (at > 0 && d < best[at - 1]) {  // insertion, after any equal distance (ties: lower index first)
        best[at] = best[at - 1];
        chosen[at] = chosen[at - 1];
        --at;
      }
      best[at] = d;
      chosen[at] = j;
      found = std::min(found + 1, keep);
    }
    for (int64_t col = found; col < keep; ++col) chosen[col] = j0 + col;
  }
}

}  // namespace

#define GEOMOL_GEOMETRY(SUFFIX, T)                                                                                 \
  extern "C" int geomol_block_min_distance_##SUFFIX(int64_t begin, int64_t end, const T* Z, int64_t C,             \
                                                    const int64_t* start, const int64_t* length,                 \
                                                    const int64_t* rows, const int64_t* cols, T* out) {          \
    if (C < 1 || begin < 0 || end < begin) return 1;                                                             \
    block_min_distance(begin, end, Z, C, start, length, rows, cols, out);                                        \
    return 0;                                                                                                    \
  }                                                                                                              \
  extern "C" int geomol_nearest_atoms_##SUFFIX(int64_t begin, int64_t end, const T* Z, int64_t C,                 \
                                               const int64_t* group_atom, const int64_t* first,                  \
                                               const int64_t* count, int64_t keep, int64_t* out) {               \
    if (C < 1 || keep < 1 || keep > 64 || begin < 0 || end < begin) return 1;                                    \
    nearest_atoms(begin, end, Z, C, group_atom, first, count, keep, out);                                        \
    return 0;                                                                                                    \
  }

GEOMOL_GEOMETRY(f32, float)
GEOMOL_GEOMETRY(f64, double)

GEOMOL_PACKED(geomol_block_min_distance_f32)
GEOMOL_PACKED(geomol_nearest_atoms_f32)
GEOMOL_PACKED(geomol_block_min_distance_f64)
GEOMOL_PACKED(geomol_nearest_atoms_f64)

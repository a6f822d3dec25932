// The group and block level of GET's bilevel attention for one chunk of receiving blocks, forward and backward
// (geomol/nn/bilevel_attention.py: _attend and attend_backward run these where the compiled pair stage runs):
// the block softmax β over the edges entering each block, the coordinate coefficients and the scatter of the
// updates onto the receiving atoms. In PyTorch these are some thirty small operations per chunk and direction
// (scatters, gathers, broadcasts over [groups, heads, ·] and [pairs, heads, channels]); here each direction is
// one pass over the groups and pairs.
//
// Sizes: g groups, e edges, nb blocks, p pairs, n receiving atoms, h heads, dh features per head, C channels.
// Indices (int64, local to the chunk): group_edge [g], group_atom [g], edge_block [e], edge_pairs [e] (pairs of
// each edge), pair_group [p], pair_atom [p]. Tensors (row-major, contiguous): block_sum [g, h] (sum of the pairs'
// block logits), update [g, h·dh] (node MLP), kappa [g, h·C] (coordinate MLP), alpha_weight [p, h, C] (α · w_c),
// x [p, C, 3] (pair vectors), b_block [1].
//
//   τ_e = Σ_{groups of e} block_sum / edge_pairs[e] + b_block;  β_e = softmax of τ over the edges into a block
//   group_coef[g, hd, c] = β[g, hd] κ[g, hd, c];  coef[q, c] = Σ_hd alpha_weight[q, hd, c] group_coef[group, hd, c]
//   G[atom of g] += β[g, hd] update[g, hd, :];  ΔZ[atom of q] += coef[q, c] x[q, c, :]
//
// Functions return 0, or 1 for an index outside its range.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "native_packed.h"

namespace {

struct Index {
  int64_t g, e, nb, p, n, h, dh, C;
  const int64_t *group_edge, *group_atom, *edge_block, *edge_pairs, *pair_group, *pair_atom;

  bool valid() const {
    for (int64_t k = 0; k < g; ++k)
      if (group_edge[k] < 0 || group_edge[k] >= e || group_atom[k] < 0 || group_atom[k] >= n) return false;
    for (int64_t k = 0; k < e; ++k)
      if (edge_block[k] < 0 || edge_block[k] >= nb || edge_pairs[k] <= 0) return false;
    for (int64_t k = 0; k < p; ++k)
      if (pair_group[k] < 0 || pair_group[k] >= g || pair_atom[k] < 0 || pair_atom[k] >= n) return false;
    return h > 0 && dh >= 0 && C > 0;
  }
};

// β per edge [e, h] from the groups' block-logit sums: a softmax over the edges of each block.
template <typename T>
void block_softmax(const Index& ix, const T* block_sum, T b_block, T* beta_edge) {
  const int64_t h = ix.h;
  std::vector<T> logit(ix.e * h, T(0)), top(ix.nb * h, -std::numeric_limits<T>::infinity()), total(ix.nb * h, T(0));
  for (int64_t k = 0; k < ix.g; ++k)
    for (int64_t hd = 0; hd < h; ++hd) logit[ix.group_edge[k] * h + hd] += block_sum[k * h + hd];
  for (int64_t k = 0; k < ix.e; ++k)
    for (int64_t hd = 0; hd < h; ++hd) {
      T& t = logit[k * h + hd];
      t = t / T(ix.edge_pairs[k]) + b_block;
      T& m = top[ix.edge_block[k] * h + hd];
      m = std::max(m, t);
    }
  for (int64_t k = 0; k < ix.e; ++k)
    for (int64_t hd = 0; hd < h; ++hd) {
      const int64_t b = ix.edge_block[k] * h + hd;
      beta_edge[k * h + hd] = std::exp(logit[k * h + hd] - top[b]);
      total[b] += beta_edge[k * h + hd];
    }
  for (int64_t k = 0; k < ix.e; ++k)
    for (int64_t hd = 0; hd < h; ++hd) beta_edge[k * h + hd] /= total[ix.edge_block[k] * h + hd];
}

// Forward: beta_edge [e, h], beta [g, h], group_coef [g, h, C], coef [p, C]; with G [n, h·dh] and dZ [n, C, 3]
// non-null, also the outputs (overwritten).
template <typename T>
int groups_forward(const Index& ix, const T* block_sum, const T* b_block, const T* update, const T* kappa,
                   const T* alpha_weight, const T* x, T* beta_edge, T* beta, T* group_coef, T* coef, T* G, T* dZ) {
  if (!ix.valid()) return 1;
  const int64_t h = ix.h, C = ix.C, d = ix.h * ix.dh;
  block_softmax(ix, block_sum, *b_block, beta_edge);
  for (int64_t k = 0; k < ix.g; ++k)
    for (int64_t hd = 0; hd < h; ++hd) {
      const T b = beta[k * h + hd] = beta_edge[ix.group_edge[k] * h + hd];
      for (int64_t c = 0; c < C; ++c) group_coef[(k * h + hd) * C + c] = b * kappa[(k * h + hd) * C + c];
    }
  for (int64_t q = 0; q < ix.p; ++q) {
    const T* gc = group_coef + ix.pair_group[q] * h * C;
    const T* aw = alpha_weight + q * h * C;
    for (int64_t c = 0; c < C; ++c) {
      T sum = 0;
      for (int64_t hd = 0; hd < h; ++hd) sum += aw[hd * C + c] * gc[hd * C + c];
      coef[q * C + c] = sum;
    }
  }
  if (G == nullptr || dZ == nullptr) return 0;
  std::fill(G, G + ix.n * d, T(0));
  std::fill(dZ, dZ + ix.n * C * 3, T(0));
  for (int64_t k = 0; k < ix.g; ++k) {
    T* out = G + ix.group_atom[k] * d;
    for (int64_t hd = 0; hd < h; ++hd) {
      const T b = beta[k * h + hd];
      const T* u = update + k * d + hd * ix.dh;
      T* o = out + hd * ix.dh;
      for (int64_t f = 0; f < ix.dh; ++f) o[f] += b * u[f];
    }
  }
  for (int64_t q = 0; q < ix.p; ++q) {
    T* out = dZ + ix.pair_atom[q] * C * 3;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < 3; ++k) out[c * 3 + k] += coef[q * C + c] * x[(q * C + c) * 3 + k];
  }
  return 0;
}

// Backward, from grad_G [n, h·dh] and grad_dZ [n, C, 3] (either may be null) and what the forward pass gave:
// g_x [p, C, 3] (the part through coef; zero without grad_dZ), g_alpha_weight [p, h, C], g_kappa [g, h·C] (both
// untouched without grad_dZ), g_update [g, h·dh] (untouched without grad_G), g_block_sum [g, h], g_b_block [1].
template <typename T>
int groups_backward(const Index& ix, const T* grad_G, const T* grad_dZ, const T* update, const T* kappa,
                    const T* alpha_weight, const T* x, const T* beta_edge, const T* beta, const T* group_coef,
                    const T* coef, T* g_x, T* g_alpha_weight, T* g_kappa, T* g_update, T* g_block_sum, T* g_b_block) {
  if (!ix.valid()) return 1;
  const int64_t h = ix.h, C = ix.C, d = ix.h * ix.dh;
  std::vector<T> g_beta(ix.g * h, T(0));
  if (grad_dZ != nullptr) {
    std::vector<T> g_group_coef(ix.g * h * C, T(0)), g_coef(C);
    for (int64_t q = 0; q < ix.p; ++q) {
      const T* gp = grad_dZ + ix.pair_atom[q] * C * 3;
      const T* xq = x + q * C * 3;
      for (int64_t c = 0; c < C; ++c) {
        g_coef[c] = gp[c * 3] * xq[c * 3] + gp[c * 3 + 1] * xq[c * 3 + 1] + gp[c * 3 + 2] * xq[c * 3 + 2];
        for (int64_t k = 0; k < 3; ++k) g_x[(q * C + c) * 3 + k] = gp[c * 3 + k] * coef[q * C + c];
      }
      const int64_t grp = ix.pair_group[q];
      for (int64_t hd = 0; hd < h; ++hd)
        for (int64_t c = 0; c < C; ++c) {
          const int64_t at = (q * h + hd) * C + c, gat = (grp * h + hd) * C + c;
          g_alpha_weight[at] = g_coef[c] * group_coef[gat];
          g_group_coef[gat] += g_coef[c] * alpha_weight[at];
        }
    }
    for (int64_t k = 0; k < ix.g; ++k)
      for (int64_t hd = 0; hd < h; ++hd) {
        T sum = 0;
        for (int64_t c = 0; c < C; ++c) {
          const int64_t at = (k * h + hd) * C + c;
          sum += g_group_coef[at] * kappa[at];
          g_kappa[at] = g_group_coef[at] * beta[k * h + hd];
        }
        g_beta[k * h + hd] += sum;
      }
  } else {
    std::fill(g_x, g_x + ix.p * C * 3, T(0));
  }
  if (grad_G != nullptr) {
    for (int64_t k = 0; k < ix.g; ++k) {
      const T* gg = grad_G + ix.group_atom[k] * d;
      for (int64_t hd = 0; hd < h; ++hd) {
        const T b = beta[k * h + hd];
        T sum = 0;
        for (int64_t f = hd * ix.dh; f < (hd + 1) * ix.dh; ++f) {
          sum += gg[f] * update[k * d + f];
          g_update[k * d + f] = gg[f] * b;
        }
        g_beta[k * h + hd] += sum;
      }
    }
  }
  // block softmax: g_τ = β (g_β − Σ_{edges of the block} g_β β), then τ's mean over the pairs of the edge
  std::vector<T> g_edge(ix.e * h, T(0)), inner(ix.nb * h, T(0));
  for (int64_t k = 0; k < ix.g; ++k)
    for (int64_t hd = 0; hd < h; ++hd) g_edge[ix.group_edge[k] * h + hd] += g_beta[k * h + hd];
  for (int64_t k = 0; k < ix.e; ++k)
    for (int64_t hd = 0; hd < h; ++hd) inner[ix.edge_block[k] * h + hd] += g_edge[k * h + hd] * beta_edge[k * h + hd];
  T g_bias = 0;
  for (int64_t k = 0; k < ix.e; ++k)
    for (int64_t hd = 0; hd < h; ++hd) {
      T& g = g_edge[k * h + hd];
      g = beta_edge[k * h + hd] * (g - inner[ix.edge_block[k] * h + hd]);
      g_bias += g;
      g /= T(ix.edge_pairs[k]);
    }
  *g_b_block = g_bias;
  for (int64_t k = 0; k < ix.g; ++k)
    for (int64_t hd = 0; hd < h; ++hd) g_block_sum[k * h + hd] = g_edge[ix.group_edge[k] * h + hd];
  return 0;
}

}  // namespace

#define GEOMOL_ATTEND_GROUPS(SUFFIX, T)                                                                             \
  extern "C" int geomol_attend_groups_##SUFFIX(                                                                   \
      int64_t g, int64_t e, int64_t nb, int64_t p, int64_t n, int64_t h, int64_t dh, int64_t C,                  \
      const int64_t* group_edge, const int64_t* group_atom, const int64_t* edge_block, const int64_t* edge_pairs, \
      const int64_t* pair_group, const int64_t* pair_atom, const T* block_sum, const T* b_block, const T* update,  \
      const T* kappa, const T* alpha_weight, const T* x, T* beta_edge, T* beta, T* group_coef, T* coef, T* G,     \
      T* dZ) {                                                                                                    \
    const Index ix{g, e, nb, p, n, h, dh, C, group_edge, group_atom, edge_block, edge_pairs, pair_group,         \
                   pair_atom};                                                                                    \
    return groups_forward<T>(ix, block_sum, b_block, update, kappa, alpha_weight, x, beta_edge, beta,            \
                             group_coef, coef, G, dZ);                                                            \
  }                                                                                                               \
  extern "C" int geomol_attend_groups_backward_##SUFFIX(                                                          \
      int64_t g, int64_t e, int64_t nb, int64_t p, int64_t n, int64_t h, int64_t dh, int64_t C,                  \
      const int64_t* group_edge, const int64_t* group_atom, const int64_t* edge_block, const int64_t* edge_pairs, \
      const int64_t* pair_group, const int64_t* pair_atom, const T* grad_G, const T* grad_dZ, const T* update,    \
      const T* kappa, const T* alpha_weight, const T* x, const T* beta_edge, const T* beta, const T* group_coef,  \
      const T* coef, T* g_x, T* g_alpha_weight, T* g_kappa, T* g_update, T* g_block_sum, T* g_b_block) {          \
    const Index ix{g, e, nb, p, n, h, dh, C, group_edge, group_atom, edge_block, edge_pairs, pair_group,         \
                   pair_atom};                                                                                    \
    return groups_backward<T>(ix, grad_G, grad_dZ, update, kappa, alpha_weight, x, beta_edge, beta, group_coef,  \
                              coef, g_x, g_alpha_weight, g_kappa, g_update, g_block_sum, g_b_block);              \
  }

GEOMOL_ATTEND_GROUPS(f32, float)
GEOMOL_ATTEND_GROUPS(f64, double)

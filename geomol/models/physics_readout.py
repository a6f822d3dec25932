"""A physics-shaped affinity read-out: pK as a sum of ligand–receptor atom-pair energies.

Over the pairs of a ligand heavy atom i and a receptor heavy atom j closer than ``cutoff`` in the
input pose (d_ij in Å), with r0_ij = R_i + R_j + δ_ij (Bondi van der Waals radii of the two
elements plus a learned correction |δ| < 0.5 Å)::

    E_vdW  = ε_ij [(r0/d)^12 − 2 (r0/d)^6]         every pair but metal–ligand contacts (ε_ij in (0, 0.03))
    E_hb   = −w_hb g_ij ramp(d − r0; −0.7, 0)        ligand N/O with receptor N/O
    E_hyd  = −w_hyd g_ij ramp(d − r0; 0.5, 1.5)      ligand C/S/halogen with receptor C/S
    E_met  = −w_met g_ij ramp(d − r0; −0.7, 0)       ligand N/O/S with a receptor metal ion
    ΔG     = Σ_pairs (E_vdW + E_hb + E_hyd + E_met) / (1 + c_rot N_rot)      [kcal/mol]
    pK     = −ΔG / (RT ln 10) + b                    RT ln 10 = 1.364 kcal/mol at 298 K

``ramp(x; lo, hi)`` is 1 below lo, 0 above hi and linear between; the gates g_ij ∈ (0, 1), the well
depths ε_ij and the corrections δ_ij come from the two atoms' GET features (h_i, h_j), so GET decides
which contacts count and how much; w_hb, w_hyd, w_met, c_rot ≥ 0 are learned scalars and N_rot is the
ligand's rotatable-bond count (the graph's ``ligand_descriptors``). The ratio r0/d is capped at
:data:`MAX_OVERLAP` so a clash (a decoy pose) costs a large but finite energy. The functional form
follows the physics-informed scoring functions of the field (van der Waals, hydrogen-bond,
hydrophobic and metal terms over a torsional-entropy divisor); everything learned is read from GET.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from geomol.data.chemistry.ligand_features import DESCRIPTOR_NAMES
from geomol.data.vocab import ATOM_TYPES
from geomol.errors import InputCheckError
from geomol.nn.neighbors import radius_search
from geomol.units import KCAL_PER_PK

__all__ = ["PhysicsReadout", "ramp", "MAX_OVERLAP", "RT_LN10"]

RT_LN10 = round(KCAL_PER_PK, 3)  # 1.364 kcal/mol per pK unit, the rounded value the read-out was trained with
MAX_OVERLAP = 1.3  # cap of r0/d: a clashing pair costs at most ε (1.3^12 − 2·1.3^6) ≈ 13.6 ε
TYPICAL_PK = 6.0  # where the corpus' labels centre: the initial offset of read-outs without a contact sum
_ROTATABLE = DESCRIPTOR_NAMES.index("rotatable_bonds")

_BONDI_RADII = {"H": 1.20, "C": 1.70, "N": 1.55, "O": 1.52, "F": 1.47, "P": 1.80, "S": 1.80, "Cl": 1.75,
                "Br": 1.85, "I": 1.98, "Se": 1.90, "B": 1.92, "Si": 2.10, "Zn": 1.39, "Mg": 1.73, "Ca": 2.31,
                "Mn": 1.61, "Fe": 1.56, "Co": 1.52, "Ni": 1.63, "Cu": 1.40, "Na": 2.27, "K": 2.75, "Cd": 1.58,
                "Hg": 1.55}
_DEFAULT_RADIUS = 1.80
_POLAR = ("N", "O")
_HYDROPHOBIC_LIGAND = ("C", "S", "F", "Cl", "Br", "I")
_HYDROPHOBIC_RECEPTOR = ("C", "S")
_METAL_LIGANDS = ("N", "O", "S")
_METALS = ("Zn", "Mg", "Ca", "Mn", "Fe", "Co", "Ni", "Cu", "Na", "K", "Cd", "Hg")


def _atom_table(values) -> torch.Tensor:
    """[len(ATOM_TYPES)] lookup by atom type index: a radius per element or membership of a tuple."""
    if isinstance(values, dict):
        return torch.tensor([values.get(t, _DEFAULT_RADIUS) for t in ATOM_TYPES])
    return torch.tensor([t in values for t in ATOM_TYPES])


def ramp(x: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """1 for x ≤ lo, 0 for x ≥ hi, linear between (same shape as x)."""
    return ((hi - x) / (hi - lo)).clamp(0.0, 1.0)


class PhysicsReadout(nn.Module):
    """pK from atom-pair energies whose parameters GET predicts (see the module docstring).

    Args:
        hidden: GET's feature size.
        cutoff: Å, pairs farther apart in the input pose do not interact.

    ``forward(model, out)`` needs ``out.graph`` (the input pose and the ligand's rotatable bonds) and
    returns [B] pK. :meth:`terms` gives the per-complex energy terms for inspection.
    """

    def __init__(self, hidden: int, cutoff: float = 8.0):
        super().__init__()
        self.cutoff = float(cutoff)
        self.ligand_proj = nn.Linear(hidden, hidden)
        self.receptor_proj = nn.Linear(hidden, hidden)
        self.pair_head = nn.Linear(hidden, 5)  # δ, ε, hydrogen-bond, hydrophobic and metal gates
        self.raw_weights = nn.Parameter(torch.log(torch.expm1(torch.tensor([0.5, 0.05, 1.0]))))
        self.raw_rotor = nn.Parameter(torch.log(torch.expm1(torch.tensor(0.05))))
        # Initial offset: a typical pK less the ~3 pK the untrained contact terms give a drug-sized ligand.
        self.offset = nn.Parameter(torch.tensor(TYPICAL_PK - 3.0))
        for name, table in (("radius", _BONDI_RADII), ("polar", _POLAR), ("hydrophobic_ligand", _HYDROPHOBIC_LIGAND),
                            ("hydrophobic_receptor", _HYDROPHOBIC_RECEPTOR), ("metal_ligand", _METAL_LIGANDS),
                            ("metal", _METALS)):
            self.register_buffer(f"_{name}", _atom_table(table), persistent=False)

    def _pairs(self, out):
        """(ligand atom, receptor atom, atom graph) indices of the interacting heavy-atom pairs."""
        g = out.graph
        atom_graph = out.block_batch[g.block_id]
        segment, is_global = g.segment[g.block_id], g.is_global[g.block_id]
        heavy = ~is_global & (g.A != ATOM_TYPES.index("H"))
        ligand = torch.nonzero(heavy & (segment == 1)).squeeze(1)
        receptor = torch.nonzero(heavy & (segment == 0)).squeeze(1)
        X = g.X.detach()
        pairs = radius_search(X[ligand], X[receptor], self.cutoff, atom_graph[ligand], atom_graph[receptor])
        return ligand[pairs[0]], receptor[pairs[1]], atom_graph

    def terms(self, model, out) -> dict[str, torch.Tensor]:
        """Per complex [B]: ``vdw``, ``hbond``, ``hydrophobic``, ``metal`` (kcal/mol, before the rotor
        divisor), ``rotatable_bonds`` and ``pK``."""
        g = out.graph
        if g is None:
            raise ValueError("PhysicsReadout needs GETOutput.graph (the input complexes)")
        rotors = g.ligand_descriptors[:, _ROTATABLE].to(out.H.dtype).reshape(-1)
        if torch.isnan(rotors).any():
            raise InputCheckError("this model's physics read-out needs the ligand's bonds (rotatable bonds): give "
                                  "the ligand as SDF or MOL2, not as PDB records", getattr(g, "name", None))
        i, j, atom_graph = self._pairs(out)
        A, X = g.A, g.X.to(out.H.dtype)
        d = (X[i] - X[j]).norm(dim=-1)
        raw = self.pair_head(F.silu(self.ligand_proj(out.H)[i] + self.receptor_proj(out.H)[j]))
        r0 = self._radius[A[i]] + self._radius[A[j]] + 0.5 * torch.tanh(raw[:, 0])
        eps = 0.03 * torch.sigmoid(raw[:, 1])
        metal = self._metal_ligand[A[i]] & self._metal[A[j]]
        kinds = torch.stack([self._polar[A[i]] & self._polar[A[j]],
                             self._hydrophobic_ligand[A[i]] & self._hydrophobic_receptor[A[j]], metal, ~metal], 1)
        weights = F.softplus(self.raw_weights)
        n_graphs = rotors.numel()
        pair_graph = atom_graph[i]
        per_term = {}
        ratio6 = ((r0 / d.clamp_min(0.5)).clamp(max=MAX_OVERLAP)) ** 6
        per_term["vdw"] = eps * (ratio6 * ratio6 - 2.0 * ratio6) * kinds[:, 3]
        excess = d - r0
        gates = torch.sigmoid(raw[:, 2:])
        for k, (name, lo, hi) in enumerate((("hbond", -0.7, 0.0), ("hydrophobic", 0.5, 1.5), ("metal", -0.7, 0.0))):
            per_term[name] = -weights[k] * gates[:, k] * ramp(excess, lo, hi) * kinds[:, k]
        sums = {name: torch.zeros(n_graphs, dtype=out.H.dtype, device=out.H.device).index_add(0, pair_graph, value)
                for name, value in per_term.items()}
        energy = sum(sums.values())
        delta_g = energy / (1.0 + F.softplus(self.raw_rotor) * rotors)
        return {**sums, "rotatable_bonds": rotors, "pK": -delta_g / RT_LN10 + self.offset}

    def forward(self, model, out) -> torch.Tensor:
        return self.terms(model, out)["pK"]

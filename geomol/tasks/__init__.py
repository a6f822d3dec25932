"""Lightning wiring of models and datasets: task modules and data modules."""
from geomol.tasks.affinity import AffinityModule, PairClassificationModule
from geomol.tasks.affinity_data import (
    AffinityDataModule,
    BenchmarkAffinityDataModule,
    LBADataModule,
    LEPDataModule,
    PDBbindDataModule,
    PLBDataModule,
    PPADataModule,
)
from geomol.tasks.corpus_data import CorpusDataModule
from geomol.tasks.nucleic_data import NucleicAffinityDataModule
from geomol.tasks.protein_affinity_data import ProteinAffinityDataModule
from geomol.tasks.dynamics import DynamicsModule
from geomol.tasks.dynamics_data import (
    MD17DataModule,
    MDTrajectoryDataModule,
    MocapDataModule,
    NBodyDataModule,
    TrajectoryDataModule,
)
from geomol.tasks.molecule_data import MoleculeDataModule

__all__ = [
    "AffinityModule", "PairClassificationModule", "DynamicsModule",
    "AffinityDataModule", "BenchmarkAffinityDataModule", "PLBDataModule", "PDBbindDataModule", "LBADataModule", "LEPDataModule",
    "PPADataModule", "ProteinAffinityDataModule", "CorpusDataModule", "NucleicAffinityDataModule", "TrajectoryDataModule",
    "NBodyDataModule", "MocapDataModule", "MD17DataModule", "MDTrajectoryDataModule", "MoleculeDataModule",
]

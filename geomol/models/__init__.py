"""Models: GET (affinity, pair classification, embeddings); EGNO and baselines."""
from geomol.models.get import (GET, GETAffinity, GETInputs, GETModel, GETOutput, GETPairClassifier,
                               load_official_state_dict)

__all__ = ["GET", "GETAffinity", "GETInputs", "GETModel", "GETOutput", "GETPairClassifier", "load_official_state_dict"]

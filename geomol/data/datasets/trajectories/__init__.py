"""Trajectory datasets, one module per family: N-body (:mod:`.nbody`), motion capture (:mod:`.mocap`), MD17
(:mod:`.md17`), MD through MDAnalysis (:mod:`.md_trajectory`), windows of small-molecule runs
(:mod:`.molecule_windows`), and the pieces they share (:mod:`.trajectory`)."""

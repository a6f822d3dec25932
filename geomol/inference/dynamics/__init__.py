"""Prediction with trajectory models: the loaded model (:mod:`.dynamics_model`), rollouts window after window from
arrays (:mod:`.rollout`), MD files (:mod:`.rollout_files`) and small-molecule files (:mod:`.molecule_inputs`,
:mod:`.molecule_rollout`), what they write (:mod:`.rollout_output`), and how they are judged: chemistry per frame
(:mod:`.rollout_chemistry`), models and baselines on the same windows (:mod:`.rollout_evaluation`), the ensemble
against a reference run (:mod:`.ensemble_comparison`, :mod:`.ensemble_plot`), the comparison with a reference
trajectory (:mod:`.rollout_report`); the optional bond-restoring projection (:mod:`.bond_restoring`)."""

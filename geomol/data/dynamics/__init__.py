"""How a state of a dynamical system becomes a trajectory model's input: the data protocol a model records
(:mod:`~geomol.data.dynamics.protocol`), the registered kinds of systems with their graph builders
(:mod:`~geomol.data.dynamics.systems`) and the small fixed edge sets they use (:mod:`~geomol.data.dynamics.graphs`)."""

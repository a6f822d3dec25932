"""The processed-data store: items built once from their inputs, keyed by a hash of inputs and parameters
(:mod:`~geomol.data.store.cache`), filled in parallel and resumably (:mod:`~geomol.data.store.preprocess`)."""

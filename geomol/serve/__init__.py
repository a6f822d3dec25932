"""``geomol serve``: the affinity predictor as a web service and a page (optional extra ``serve``).

* :mod:`~geomol.serve.settings` — address, token, worker count and the limits, each default in one place;
* :mod:`~geomol.serve.app` — the FastAPI application (:func:`~geomol.serve.app.create_app`): API, page, errors;
* :mod:`~geomol.serve.routes` — the ``/v1`` endpoints; :mod:`~geomol.serve.guards` — token, host, size and
  time limits, security headers;
* :mod:`~geomol.serve.uploads` — uploads identified by content, counted and named by the server;
* :mod:`~geomol.serve.store` — job states in SQLite and job folders, written atomically, recovered after a crash;
* :mod:`~geomol.serve.pool` — the bounded pool of worker processes and its bounded queue;
* :mod:`~geomol.serve.worker` and :mod:`~geomol.serve.predict_job` — inside a worker: one job through
  :func:`geomol.api.predict_affinity`'s streaming form, and its result files.

The web process never imports torch or parses a molecule; the workers do, under a time limit per job.
See ``docs/serve.md``.
"""

"""What the speed benchmarks (``benchmarks/*_speed.py``, ``benchmarks/preprocess.py``) record and how they time.

* :mod:`~geomol.benchmarking.run_record`: the run's metadata (provenance, threads, product kernel, machine probe),
  peak and per-step memory, fresh worker processes and the result file;
* :mod:`~geomol.benchmarking.interleaved`: implementations timed alternately step by step, under optional
  controlled load, and the arithmetic of one call (:func:`~geomol.benchmarking.interleaved.product_gflop`);
* :mod:`~geomol.benchmarking.machine_load`: what else ran on the machine while a block was measured;
* :mod:`~geomol.benchmarking.stressors`: a CPU- or memory-bound load process on another core;
* :mod:`~geomol.benchmarking.edge_scaling`: how linear a model's cost is in the size of one input.

Benchmarks import these (never each other by path); nothing else in geomol does.
"""

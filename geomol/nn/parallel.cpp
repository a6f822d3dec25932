// Runs ranges of a compiled loop on an OpenMP team (geomol/nn/native.py calls it). Built with -fopenmp the library
// links libgomp.so.1, which is the runtime torch's CPU build has already loaded: the ranges then run on torch's
// own worker threads, which are still spinning after the last parallel torch operation, instead of competing with
// them for the cores. Built without OpenMP (a compiler that lacks it), the ranges run one after another.
#include <cstdint>

typedef int (*PackedFunction)(const int64_t* words);

// function(words + i * stride) for i < n, n threads at once; returns the bitwise or of the calls' return codes.
extern "C" int geomol_run_ranges(int64_t n, PackedFunction function, const int64_t* words, int64_t stride) {
  int status = 0;
#pragma omp parallel for num_threads(n) schedule(static, 1) reduction(| : status)
  for (int64_t i = 0; i < n; ++i) status |= function(words + i * stride);
  return status;
}

// 1 when built with OpenMP (geomol_run_ranges runs its ranges at once), else 0.
extern "C" int geomol_openmp() {
#ifdef _OPENMP
  return 1;
#else
  return 0;
#endif
}

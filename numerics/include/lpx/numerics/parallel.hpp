// A static-schedule parallel loop that opens no OpenMP region when one thread would run it
// (docs/architecture.md#parallel-regions).
//
// `#pragma omp parallel for if (false)` does not skip the runtime: GCC still calls
// GOMP_parallel, which sets up a team of one and ends it at a barrier whose wake-up is a
// futex system call (about 1 us on a virtual machine). A gpt-small mxfp4-sr-rht step on one
// thread opened about 11,000 such regions (GEMMs, element casts, Hadamard transforms and
// quantizer passes over small operands), against 2,400 for fp32.
#pragma once

#include <omp.h>

#include <cstdint>

namespace lpx {

// body(i) for i in [0, n): on `threads` OpenMP threads with a static schedule where both
// n and threads exceed 1, else in order on the calling thread. Bodies that depend only on
// i give the same results either way.
template <class Body>
void parallel_for(int64_t n, int threads, Body&& body) {
  if (n > 1 && threads > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  for (int64_t i = 0; i < n; ++i) body(i);
}

// parallel_for for loops that keep per-thread state (scratch buffers, partial totals):
// per_thread(each) runs once on each of `threads` OpenMP threads where both n and threads
// exceed 1, else once on the calling thread, and each(body) runs body(i) over that
// thread's static share of [0, n) (all of it on one thread). What per_thread builds before
// calling each is its thread's own; results it combines after each need their own
// synchronization (an omp critical, which outside a region is a plain lock).
template <class PerThread>
void parallel_for_threads(int64_t n, int threads, PerThread&& per_thread) {
  if (n > 1 && threads > 1) {
#pragma omp parallel num_threads(threads)
    per_thread([n](auto&& body) {
      // an orphaned worksharing loop: it binds to the region above
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n; ++i) body(i);
    });
    return;
  }
  per_thread([n](auto&& body) {
    for (int64_t i = 0; i < n; ++i) body(i);
  });
}

// The threads a region opened here would get (omp_get_max_threads), or 1 when `wanted`
// is false: the second argument of parallel_for for loops that parallelize only when
// large enough.
inline int threads_if(bool wanted) { return wanted ? omp_get_max_threads() : 1; }

}  // namespace lpx

// lpx::parallel_for and parallel_for_threads (numerics/parallel.hpp): every index once, in
// order on the calling thread when one piece or one thread would run it, and no OpenMP
// region then (an if(false) region would still be one: omp_get_level counts inactive
// regions too).
#include <catch2/catch.hpp>

#include <omp.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "lpx/numerics/parallel.hpp"

TEST_CASE("parallel_for: every index once; a region only for several pieces on several threads", "[numerics]") {
  for (const int64_t n : {0, 1, 2, 7, 100})
    for (const int threads : {0, 1, 2, 4}) {
      INFO("n = " << n << ", threads = " << threads);
      std::vector<std::atomic<int>> visits(static_cast<size_t>(n));
      std::atomic<int> levels{0}, calls{0};
      std::vector<int64_t> order;  // the serial case only: written by one thread
      const bool serial = n <= 1 || threads <= 1;
      lpx::parallel_for(n, threads, [&](int64_t i) {
        ++visits[static_cast<size_t>(i)];
        levels += omp_get_level();
        ++calls;
        if (serial) order.push_back(i);
      });
      CHECK(calls.load() == n);
      for (const auto& v : visits) CHECK(v.load() == 1);
      // inside a region omp_get_level() is 1 whether or not the region got a second thread
      CHECK(levels.load() == (serial ? 0 : n));
      if (serial)
        for (int64_t i = 0; i < n; ++i) CHECK(order[static_cast<size_t>(i)] == i);
    }
}

TEST_CASE("parallel_for_threads: per-thread state, every index once, one call on one thread", "[numerics]") {
  for (const int64_t n : {0, 1, 2, 7, 100})
    for (const int threads : {1, 2, 4}) {
      INFO("n = " << n << ", threads = " << threads);
      std::vector<std::atomic<int>> visits(static_cast<size_t>(n));
      std::atomic<int> states{0}, levels{0};
      int64_t total = 0;  // each thread's own count, merged under a critical section
      const bool serial = n <= 1 || threads <= 1;
      lpx::parallel_for_threads(n, threads, [&](auto&& each) {
        ++states;
        int64_t mine = 0;  // this thread's state
        std::vector<int64_t> order;
        each([&](int64_t i) {
          ++visits[static_cast<size_t>(i)];
          levels += omp_get_level();
          ++mine;
          order.push_back(i);
        });
        // a thread's share is in increasing order (static schedule), all of it when serial
        for (size_t q = 1; q < order.size(); ++q) CHECK(order[q] > order[q - 1]);
#pragma omp critical(test_parallel_total)
        total += mine;
      });
      CHECK(total == n);
      for (const auto& v : visits) CHECK(v.load() == 1);
      if (serial) {
        CHECK(states.load() == 1);
        CHECK(levels.load() == 0);
      } else {
        CHECK(states.load() >= 1);
        CHECK(states.load() <= threads);
        CHECK(levels.load() == n);
      }
    }
}

TEST_CASE("threads_if: one thread unless wanted, then what a region would get", "[numerics]") {
  CHECK(lpx::threads_if(false) == 1);
  CHECK(lpx::threads_if(true) == omp_get_max_threads());
}

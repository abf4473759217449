// Runs independent pieces of the solver's work on several threads.
#ifndef SACPLAN_PLANNER_SEARCH_PARALLEL_FOR_H_
#define SACPLAN_PLANNER_SEARCH_PARALLEL_FOR_H_

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace sacplan {

// The threads SolverOptions::threads asks for: itself when positive,
// otherwise the machine's hardware threads, at most 8 (a solve has a few
// tens of blocks to share out).
inline int SolverThreads(int requested) {
  if (requested > 0) return requested;
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 8);
}

// Calls body(i) for every i in [0, count), on up to `threads` threads (the
// calling one among them), each taking the next index not yet taken, and
// returns when every call has. Calls for different i must be safe to run at
// once; which thread runs which i is not fixed, so a caller that needs a
// fixed result writes each i's result to a slot of its own.
template <typename Body>
void ParallelFor(int count, int threads, const Body& body) {
  threads = std::min(threads, count);
  if (threads <= 1) {
    for (int i = 0; i < count; ++i) body(i);
    return;
  }
  std::atomic<int> next{0};
  auto work = [&] {
    for (int i = next.fetch_add(1); i < count; i = next.fetch_add(1)) body(i);
  };
  std::vector<std::jthread> helpers;
  helpers.reserve(threads - 1);
  for (int t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
}

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_PARALLEL_FOR_H_

#include "bench/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace dmuon::apps::bench {

Progress::Progress(int rank, int runs, long total_steps)
    : on_(rank == 0 && isatty(STDERR_FILENO) == 1),
      runs_(runs),
      total_(total_steps),
      t0_(std::chrono::steady_clock::now()) {}

Progress::~Progress() {
  if (on_ && run_ > 0) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
}

void Progress::begin_run(const std::string& what) {
  ++run_;
  what_ = what;
}

void Progress::step(int s, int steps) {
  ++done_;
  if (!on_) return;
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const double eta =
      done_ > 0 ? el / static_cast<double>(done_) * static_cast<double>(total_ - done_) : 0.0;
  std::fputs(fmt::format("\r\033[Krun {}/{}: {} step {}/{}, ETA {:.0f} s", run_, runs_, what_, s,
                         steps, eta)
                 .c_str(),
             stderr);
  std::fflush(stderr);
}

}  // namespace dmuon::apps::bench

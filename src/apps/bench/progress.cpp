#include "bench/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace dmuon::apps::bench {
namespace {

// Open MPI pipes the ranks' stderr to mpirun (never a terminal here), so under Open MPI look at
// mpirun's own stderr (the parent process; Linux /proc). DMUON_PROGRESS=1 forces it on, 0 off.
bool interactive() {
  if (const char* e = std::getenv("DMUON_PROGRESS")) return std::string(e) == "1";
  if (isatty(STDERR_FILENO) == 1) return true;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return false;
  std::error_code ec;
  const auto target = std::filesystem::read_symlink(
      std::filesystem::path("/proc") / std::to_string(getppid()) / "fd" / "2", ec);
  if (ec) return false;
  const std::string t = target.string();
  return t.rfind("/dev/pts/", 0) == 0 || t.rfind("/dev/tty", 0) == 0;
}

}  // namespace

Progress::Progress(int rank, int runs, long total_steps)
    : on_(rank == 0 && interactive()),
      runs_(runs),
      total_(total_steps),
      t0_(std::chrono::steady_clock::now()) {}

Progress::~Progress() {
  done();
}

void Progress::done() {
  if (on_ && run_ > 0) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
  on_ = false;
}

void Progress::begin_run(const std::string& what) {
  ++run_;
  what_ = what;
}

void Progress::show(const std::string& text) {
  run_ = std::max(run_, 1);
  if (!on_) return;
  std::fputs(("\r\033[K" + text).c_str(), stderr);
  std::fflush(stderr);
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

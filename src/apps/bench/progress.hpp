#pragma once
// Progress on rank 0's stderr, only when stderr is a terminal (under Open MPI, whose ranks'
// stderr is always a pipe: when mpirun's stderr is; DMUON_PROGRESS=1/0 forces): one line
// "run k/N: <method> <boundary> step s/S, ETA Ns", erased when the runs end.

#include <chrono>
#include <string>

namespace dmuon::apps::bench {

class Progress {
 public:
  /// `total_steps`: steps of all runs together (warmup included). Enabled only on rank 0 with a
  /// terminal stderr.
  Progress(int rank, int runs, long total_steps);
  ~Progress();
  void begin_run(const std::string& what);
  void step(int s, int steps);
  /// Shows `text` as the line instead (a tool whose work is not runs of steps).
  void show(const std::string& text);
  /// Erases the line (call before printing results; the destructor does it too).
  void done();

 private:
  bool on_ = false;
  int runs_ = 0, run_ = 0;
  long total_ = 0, done_ = 0;
  std::string what_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace dmuon::apps::bench

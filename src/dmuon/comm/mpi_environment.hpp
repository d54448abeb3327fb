#pragma once
// RAII MPI lifetime for apps and test mains: initializes MPI (thread level FUNNELED: only the
// main thread calls MPI) unless someone already did, and finalizes it only if it initialized
// it. Sets MPI_ERRORS_RETURN on MPI_COMM_WORLD so failures come back as codes that
// DMUON_CHECK_MPI turns into exceptions naming the call. Communicators derived from world
// afterwards (MPI_Comm_dup/split) inherit the handler.

namespace dmuon::comm {

/// Called before MPI_Init. Open MPI's nonblocking reduce (up to 4 ranks) and broadcast (above
/// 4 ranks) pick, for large messages, a segmented chain that needs one progress call per
/// 32 KiB segment; the engine progresses MPI only between compute kernels, so a few-MB
/// gradient reduce or weight broadcast then completes long after the compute it should hide
/// behind (measured: 2 ranks, 18 of 20 ms exposed per step from the reduce chain; 8
/// oversubscribed ranks, ~100 -> ~60 ms exposed from the broadcast chain). Selects libnbc's
/// binomial trees instead (what it uses for small messages anyway), unless the user set
/// OMPI_MCA_coll_libnbc_ireduce_algorithm / _ibcast_algorithm. No effect on other MPIs.
void prefer_progress_friendly_collectives();

class MpiEnvironment {
 public:
  /// argc/argv may be null. Throws RuntimeFailure if MPI cannot provide FUNNELED.
  MpiEnvironment(int* argc, char*** argv);
  MpiEnvironment() : MpiEnvironment(nullptr, nullptr) {}
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  /// Rank and size in MPI_COMM_WORLD.
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// True if this object called MPI_Init_thread (and will call MPI_Finalize).
  bool owns_mpi() const { return owns_; }

 private:
  bool owns_ = false;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace dmuon::comm

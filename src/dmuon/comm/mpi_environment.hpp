#pragma once
// RAII MPI lifetime for apps and test mains: initializes MPI (thread level FUNNELED: only the
// main thread calls MPI) unless someone already did, and finalizes it only if it initialized
// it. Sets MPI_ERRORS_RETURN on MPI_COMM_WORLD so failures come back as codes that
// DMUON_CHECK_MPI turns into exceptions naming the call. Communicators derived from world
// afterwards (MPI_Comm_dup/split) inherit the handler.

namespace dmuon::comm {

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

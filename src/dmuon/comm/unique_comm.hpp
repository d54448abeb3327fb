#pragma once
// Owning handle for an MPI communicator: frees it on destruction (unless MPI is already
// finalized, when freeing would be erroneous). Move-only.

#include <mpi.h>

namespace dmuon::comm {

class UniqueComm {
 public:
  UniqueComm() = default;
  /// Takes ownership of `comm` (MPI_COMM_NULL allowed; never pass MPI_COMM_WORLD/SELF).
  explicit UniqueComm(MPI_Comm comm) : comm_(comm) {}
  ~UniqueComm() { reset(); }
  UniqueComm(const UniqueComm&) = delete;
  UniqueComm& operator=(const UniqueComm&) = delete;
  UniqueComm(UniqueComm&& other) noexcept : comm_(other.comm_) { other.comm_ = MPI_COMM_NULL; }
  UniqueComm& operator=(UniqueComm&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = other.comm_;
      other.comm_ = MPI_COMM_NULL;
    }
    return *this;
  }

  MPI_Comm get() const { return comm_; }

  /// Frees the communicator now (no-op for MPI_COMM_NULL or after MPI_Finalize).
  void reset() noexcept {
    if (comm_ == MPI_COMM_NULL) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
    comm_ = MPI_COMM_NULL;
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

/// MPI_Comm_dup of `comm`, owned; checked.
UniqueComm dup_comm(MPI_Comm comm);

}  // namespace dmuon::comm

#pragma once
// Checked calls: every MPI/HDF5 call goes through a macro that names the call on failure.

#include <string>

#include "dmuon/base/error.hpp"

namespace dmuon::detail {
[[noreturn]] void throw_call_failure(const char* library, const char* call, long code,
                                     const char* file, int line, const std::string& detail);
}  // namespace dmuon::detail

/// Throws InputError with the given message when `cond` is false. Always on (never assert).
#define DMUON_REQUIRE(cond, msg)                   \
  do {                                             \
    if (!(cond)) throw ::dmuon::InputError((msg)); \
  } while (0)

/// Checks an MPI call (MPI_SUCCESS) and throws RuntimeFailure naming it.
#define DMUON_CHECK_MPI(call)                                                              \
  do {                                                                                     \
    const int dmuon_mpi_rc_ = (call);                                                      \
    if (dmuon_mpi_rc_ != 0)                                                                \
      ::dmuon::detail::throw_call_failure("MPI", #call, dmuon_mpi_rc_, __FILE__, __LINE__, \
                                          ::std::string());                                \
  } while (0)

/// Checks an HDF5 call (negative return is failure) and throws RuntimeFailure naming it.
#define DMUON_CHECK_H5(call)                                                              \
  ([&]() {                                                                                \
    auto dmuon_h5_rc_ = (call);                                                           \
    if (dmuon_h5_rc_ < 0)                                                                 \
      ::dmuon::detail::throw_call_failure("HDF5", #call, static_cast<long>(dmuon_h5_rc_), \
                                          __FILE__, __LINE__, ::std::string());           \
    return dmuon_h5_rc_;                                                                  \
  }())

#pragma once
// Typed exceptions: the apps map each kind to an exit code (see src/apps/run_main.hpp).

#include <stdexcept>
#include <string>

namespace dmuon {

/// Bad user input (flag, config, topology file, boundary policy, ...): exit code 2.
/// The message is one line naming the bad value and what would be valid.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(what) {}
};

/// A correctness check or regression gate failed (e.g. --check, byte audit, compare): exit 3.
class CheckFailure : public std::runtime_error {
 public:
  explicit CheckFailure(const std::string& what) : std::runtime_error(what) {}
};

/// A call into MPI, HDF5, CUDA, cuBLAS or NCCL failed; the message names the call.
class RuntimeFailure : public std::runtime_error {
 public:
  explicit RuntimeFailure(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace dmuon

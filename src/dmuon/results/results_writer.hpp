#pragma once
// Writing a results file: rank 0 only, one file per invocation, atomically (temporary name +
// rename), so an interrupted run leaves no corrupt file and an old file is replaced only when
// the new one is complete.

#include <string>

#include "dmuon/results/run_record.hpp"

namespace dmuon::results {

/// Writes `file` to `path` atomically. Throws RuntimeFailure naming the HDF5 call and the file
/// when a write fails (the temporary is removed; an existing `path` is left untouched).
void write_results(const std::string& path, const ResultsFile& file);

/// Checks, before any step runs, that `path` can be written: its directory exists and a probe
/// file can be created and removed there, and `path` itself is not a directory. Throws
/// InputError("cannot write results to '<path>': <reason>").
void check_output_writable(const std::string& path);

}  // namespace dmuon::results

#pragma once
// Reading a results file back (dmuon_compare, tests).

#include <string>

#include "dmuon/results/run_record.hpp"

namespace dmuon::results {

/// Loads every run of `path`. A missing file, a file that is not HDF5, an HDF5 file that is not
/// a dmuon results file, or an unsupported schema version is an InputError naming the file.
ResultsFile read_results(const std::string& path);

}  // namespace dmuon::results

#pragma once
// --version for the Google Benchmark binaries, like every other tool of the suite: the git
// commit, build type and library versions (dmuon::results::version_text), exit 0; and their
// shared main.

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "dmuon/results/provenance.hpp"

namespace dmuon::benchmarks {

/// True (after printing the version) when argv holds --version.
inline bool print_version_if_asked(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--version") == 0) {
      std::string tool = argv[0];
      const auto slash = tool.find_last_of('/');
      if (slash != std::string::npos) tool = tool.substr(slash + 1);
      std::fputs(results::version_text(tool).c_str(), stdout);
      return true;
    }
  return false;
}

/// The suite's Google Benchmark main after --version: unknown flags are exit 2 (bad input, as
/// in every tool), else the selected benchmarks run; returns the exit code.
inline int run_benchmarks(int& argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace dmuon::benchmarks

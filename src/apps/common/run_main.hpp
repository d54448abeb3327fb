#pragma once
// One wrapper for every app's main(): maps outcomes to exit codes so scripts can rely on them.
//   0 success, 2 bad input (one line on stderr), 3 a failed check or regression,
//   1 anything unexpected. With MPI, an unexpected error on any rank aborts all ranks.

#include <CLI/CLI.hpp>
#include <functional>

namespace dmuon::apps {

/// Exit codes shared by every app.
enum ExitCode : int { kOk = 0, kUnexpected = 1, kBadInput = 2, kCheckFailed = 3 };

/// Parses flags. Returns false when the app should exit 0 right away (--help, --version:
/// printed to stdout when `print`); throws InputError with CLI11's one-line message otherwise.
bool parse_cli(CLI::App& app, int argc, char** argv, bool print = true);

/// Runs `body` (which parses its own flags) for a serial app. CLI11 parse errors become exit 2
/// (--help exits 0).
int run_main(const char* app_name, const std::function<int()>& body);

/// The same for an MPI app: initialises MPI. Input errors are raised identically on every rank
/// (all ranks validate the same inputs), so rank 0 prints the line and every rank exits 2
/// after MPI_Finalize; any other exception aborts all ranks with the message (MPI_Abort), so
/// no rank is left hanging in a collective.
int run_mpi_main(const char* app_name, int& argc, char**& argv, const std::function<int()>& body);

}  // namespace dmuon::apps

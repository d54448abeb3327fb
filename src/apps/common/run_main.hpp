#pragma once
// One wrapper for every app's main(): maps outcomes to exit codes so scripts can rely on them.
//   0 success, 2 bad input (one line on stderr), 3 a failed check or regression,
//   1 anything unexpected. With MPI, an unexpected error on any rank aborts all ranks.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <limits>
#include <type_traits>

namespace dmuon::apps {

/// Name of the integer_text validator (parse_cli adds one only where it is missing).
inline constexpr const char* kIntegerTextValidator = "dmuon-integer";

/// integer_text's implementation: signed types range over -(max+1)..max, unsigned ones 0..max.
CLI::Validator integer_text_validator(bool is_signed, std::uint64_t max);

/// Exit codes shared by every app.
enum ExitCode : int { kOk = 0, kUnexpected = 1, kBadInput = 2, kCheckFailed = 3 };

/// The text of an integer flag of type T, checked before CLI11 converts it: CLI11 2.1 reads
/// "010" as octal, saturates 99999999999999999999 silently and wraps "-1" for an unsigned
/// flag. Valid: decimal digits, '-' first for a signed T, within T's range; leading zeros are
/// dropped. parse_cli adds it (as int, or unsigned) to every integer flag that has none, so
/// a 64-bit flag names its type here: `->transform(integer_text<std::int64_t>())`.
template <class T>
CLI::Validator integer_text() {
  static_assert(std::is_integral_v<T> && sizeof(T) <= 8, "integer flags only");
  return integer_text_validator(std::is_signed_v<T>,
                                static_cast<std::uint64_t>(std::numeric_limits<T>::max()));
}

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

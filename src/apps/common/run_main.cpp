#include "common/run_main.hpp"

#include <mpi.h>

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <string>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/comm/abort.hpp"
#include "dmuon/comm/mpi_environment.hpp"
#include "dmuon/config/config_origin.hpp"
#include "dmuon/results/provenance.hpp"

namespace dmuon::apps {
namespace {

void print_error(const char* app, const char* what) {
  std::fprintf(stderr, "%s: error: %s\n", app, what);
  std::fflush(stderr);
}

// Bad input, and where in the --config file it came from when it names a flag of the file.
void print_bad_input(const char* app, const std::string& what) {
  print_error(app, (what + config::config_origin_note(what)).c_str());
}

// A tool's output went to a full disk, a closed pipe or /dev/full: the buffered text is
// flushed here, so the loss is seen and the tool exits 2 instead of 0 having written nothing.
int checked_stdout(const char* app, int code) {
  std::cout.flush();
  const bool failed = !std::cout.good() || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (!failed) return code;
  print_error(app,
              "cannot write standard output (disk full, or the pipe or file was closed); "
              "redirect it to a writable file");
  return code == kOk ? kBadInput : code;
}

// Classifies the exception in flight; returns the exit code and prints when `print`.
int classify(const char* app, bool print, bool& unexpected, std::string& message) {
  unexpected = false;
  try {
    throw;
  } catch (const CLI::CallForHelp& e) {
    if (print) std::printf("%s", e.what());
    return kOk;
  } catch (const CLI::CallForAllHelp& e) {
    if (print) std::printf("%s", e.what());
    return kOk;
  } catch (const CLI::CallForVersion& e) {
    if (print) std::printf("%s\n", e.what());
    return kOk;
  } catch (const CLI::ParseError& e) {
    if (print) print_bad_input(app, e.what());
    return kBadInput;
  } catch (const InputError& e) {
    if (print) print_bad_input(app, e.what());
    return kBadInput;
  } catch (const CheckFailure& e) {
    if (print) print_error(app, e.what());
    return kCheckFailed;
  } catch (const std::exception& e) {
    unexpected = true;
    message = e.what();
    return kUnexpected;
  } catch (...) {
    unexpected = true;
    message = "unknown exception";
    return kUnexpected;
  }
}

}  // namespace

namespace {

std::string tool_name(int argc, char** argv) {
  if (argc < 1 || argv[0] == nullptr) return "dmuon";
  std::string s = argv[0];
  const auto slash = s.find_last_of('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

// "--name=" with nothing after '=' is an empty value: CLI11 would take the next argument as the
// value instead ("--output= --check" wrote a file named "--check" and skipped the check).
void reject_empty_values(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i] ? argv[i] : "";
    if (a == "--") break;
    if (a.size() > 3 && a.compare(0, 2, "--") == 0 && a.back() == '=' &&
        a.find('=') == a.size() - 1)
      throw InputError(fmt::format("{} has an empty value (give one after '=', or drop the flag)",
                                   a.substr(0, a.size() - 1)));
  }
}

// Every integer flag without its own integer_text (an int, or an unsigned) gets one.
void check_integer_flags(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    if (type != "INT" && type != "UINT") continue;
    try {
      (void)opt->get_validator(kIntegerTextValidator);
      continue;  // the flag names its own type
    } catch (const CLI::OptionNotFound&) {
    }
    opt->transform(type == "INT" ? integer_text<int>() : integer_text<unsigned>());
  }
}

// Every floating-point flag: CLI11's own message ("Could not convert: --memory-cap = abc")
// says neither what is wrong nor what is valid. The option's range, when it has one, is in its
// type text ("FLOAT:FLOAT in [0 - 1e+06]").
void check_number_flags(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_name().rfind("FLOAT", 0) != 0) continue;
    const std::string type = opt->get_type_name();
    const auto in = type.find(" in ");
    const std::string range = in == std::string::npos ? "" : " " + type.substr(in + 1);
    opt->transform(CLI::Validator(
        [range](std::string& value) -> std::string {
          if (value.empty()) return std::string();  // the empty-value checks name it
          char* end = nullptr;
          errno = 0;
          const double v = std::strtod(value.c_str(), &end);
          // Decimal text only: strtod would also take leading blanks and hexadecimal.
          const bool decimal = value.find_first_of("xXpP \t") == std::string::npos;
          if (!decimal || end == value.c_str() || *end != '\0' || !std::isfinite(v) ||
              errno == ERANGE)
            return fmt::format("'{}' is invalid (valid: a finite number{}, e.g. 60 or 1.5e3)",
                               abbreviate_value(value, 40), range);
          return std::string();
        },
        ""));
  }
}

}  // namespace

CLI::Validator integer_text_validator(bool is_signed, std::uint64_t max) {
  const std::string hi = std::to_string(max);
  // The magnitude of the lowest value: max + 1 for a two's-complement signed type.
  const std::string lo_magnitude = is_signed ? std::to_string(max + 1) : "0";
  const std::string valid =
      fmt::format("valid: an integer {}{}..{}", is_signed ? "-" : "", lo_magnitude, hi);
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        if (value.empty()) return std::string();  // the empty-value checks name it
        const bool negative = value[0] == '-';
        std::string digits = value.substr(negative ? 1 : 0);
        const auto invalid = [&] {
          return fmt::format("'{}' is invalid ({})", abbreviate_value(value, 40), valid);
        };
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
            (negative && !is_signed))
          return invalid();
        digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
        const std::string& limit = negative ? lo_magnitude : hi;
        // Same length: decimal strings compare as numbers.
        if (digits.size() > limit.size() || (digits.size() == limit.size() && digits > limit))
          return invalid();
        value = negative && digits != "0" ? "-" + digits : digits;
        return std::string();
      },
      "", kIntegerTextValidator);
}

bool parse_cli(CLI::App& app, int argc, char** argv, bool print) {
  const std::string tool = tool_name(argc, argv);
  app.set_version_flag(
      "--version", [tool] { return results::version_text(tool); },
      "print the git commit, build type and the CUDA, NCCL, Kokkos, HDF5, MPI and BLAS versions, "
      "then exit");
  check_integer_flags(app);
  check_number_flags(app);
  try {
    reject_empty_values(argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (print) std::printf("%s", app.help().c_str());
    return false;
  } catch (const CLI::CallForAllHelp&) {
    if (print) std::printf("%s", app.help("", CLI::AppFormatMode::All).c_str());
    return false;
  } catch (const CLI::CallForVersion& e) {
    if (print) std::printf("%s", e.what());
    return false;
  } catch (const CLI::ParseError& e) {
    // CLI11 quotes the whole argument ("Could not convert: --steps = 999...9"): one readable
    // line, however long the argument.
    throw InputError(abbreviate_value(e.what(), 300));
  }
  return true;
}

int run_main(const char* app_name, const std::function<int()>& body) {
  try {
    return checked_stdout(app_name, body());
  } catch (...) {
    bool unexpected = false;
    std::string message;
    const int code = classify(app_name, true, unexpected, message);
    if (unexpected) print_error(app_name, message.c_str());
    return code;
  }
}

int run_mpi_main(const char* app_name, int& argc, char**& argv, const std::function<int()>& body) {
  // MPI_ERRORS_RETURN on the world (inherited by every communicator derived from it): a
  // failing MPI call becomes an exception naming the call (DMUON_CHECK_MPI), which ends here.
  std::unique_ptr<comm::MpiEnvironment> mpi;
  comm::prefer_progress_friendly_collectives();
  try {
    mpi = std::make_unique<comm::MpiEnvironment>(&argc, &argv);
  } catch (const std::exception& e) {
    print_error(app_name, e.what());
    return kUnexpected;
  }
  const int rank = mpi->rank();
  int code = kOk;
  try {
    code = body();
  } catch (...) {
    bool unexpected = false;
    std::string message;
    code = classify(app_name, rank == 0, unexpected, message);
    if (unexpected) comm::abort_all(std::string(app_name) + ": " + message, kUnexpected);
  }
  return checked_stdout(app_name, code);
}

}  // namespace dmuon::apps

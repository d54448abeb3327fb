#include "dmuon/engine/exec/fault_injection.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <exception>

#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/comm/abort.hpp"
#include "dmuon/engine/exec/step_backend.hpp"

namespace dmuon::engine {

namespace {

constexpr const char* kVariable = "DMUON_INJECT_FAULT_STEP";

// A decimal integer in [lo, hi] spelling all of `s`, or -1.
long whole_number(const std::string& s, long lo, long hi) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  const long v = std::strtol(s.c_str(), nullptr, 10);
  return v >= lo && v <= hi ? v : -1;
}

}  // namespace

FaultInjection parse_fault_injection(const std::string& text) {
  if (text.empty()) return {};
  const auto colon = text.find(':');
  const long step =
      colon == std::string::npos ? -1 : whole_number(text.substr(0, colon), 1, 100000000L);
  const long rank =
      colon == std::string::npos ? -1 : whole_number(text.substr(colon + 1), 0, 100000000L);
  if (step < 0 || rank < 0)
    throw InputError(fmt::format(
        "{}='{}' is invalid (valid: STEP:RANK, a step >= 1 and a world rank >= 0, e.g. 2:1)",
        kVariable, text));
  return FaultInjection{step, static_cast<int>(rank)};
}

FaultInjection fault_injection_from_env() {
  const char* v = std::getenv(kVariable);
  return parse_fault_injection(v ? v : "");
}

void check_fault_injection(const FaultInjection& f, long total_steps, int world_size) {
  if (!f.armed()) return;
  if (f.step > total_steps)
    throw InputError(fmt::format("{}={}:{}: step {} is past the run's {} steps", kVariable, f.step,
                                 f.rank, f.step, total_steps));
  if (f.rank >= world_size)
    throw InputError(
        fmt::format("{}={}:{}: rank {} is not a rank of this {}-rank job (valid: "
                    "0..{})",
                    kVariable, f.step, f.rank, f.rank, world_size, world_size - 1));
}

void end_mid_step_failure(StepBackend& backend, MPI_Comm world) {
  const std::exception_ptr failure = std::current_exception();
  backend.abort();
  int size = 1;
  MPI_Comm_size(world, &size);
  if (size == 1) std::rethrow_exception(failure);
  std::string what = "unknown exception";
  int code = 1;
  try {
    std::rethrow_exception(failure);
  } catch (const InputError& e) {
    what = e.what();
    code = 2;
  } catch (const CheckFailure& e) {
    what = e.what();
    code = 3;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  comm::abort_all("failed mid-step: " + what, code);
}

}  // namespace dmuon::engine

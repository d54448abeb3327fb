#include "common/setup_agreement.hpp"

#include <fmt/format.h>

#include <exception>
#include <string>
#include <vector>

#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/comm/abort.hpp"

namespace dmuon::apps {
namespace {

// Failure classes, ordered so that MPI_MAX picks the most severe.
constexpr int kNone = 0, kInput = 1, kUnexpected = 2;

}  // namespace

void run_setup(MPI_Comm comm, const std::function<void()>& setup) {
  int failure = kNone;
  std::string message;
  try {
    setup();
  } catch (const InputError& e) {
    failure = kInput;
    message = e.what();
  } catch (const std::exception& e) {
    failure = kUnexpected;
    message = e.what();
  } catch (...) {
    failure = kUnexpected;
    message = "unknown exception";
  }
  int rank = 0, size = 1;
  DMUON_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DMUON_CHECK_MPI(MPI_Comm_size(comm, &size));
  int worst = kNone;
  DMUON_CHECK_MPI(MPI_Allreduce(&failure, &worst, 1, MPI_INT, MPI_MAX, comm));
  if (worst == kNone) return;
  // The lowest rank with the worst failure speaks for all; count how many ranks failed alike.
  const int mine = failure == worst ? rank : size;
  int speaker = size;
  DMUON_CHECK_MPI(MPI_Allreduce(&mine, &speaker, 1, MPI_INT, MPI_MIN, comm));
  if (worst == kUnexpected) {
    if (rank == speaker) comm::abort_all(message, 1);
    DMUON_CHECK_MPI(MPI_Barrier(comm));  // never completes: the speaker aborts the job
    comm::abort_all("set-up failed on rank " + std::to_string(speaker), 1);
  }
  int len = rank == speaker ? static_cast<int>(message.size()) : 0;
  DMUON_CHECK_MPI(MPI_Bcast(&len, 1, MPI_INT, speaker, comm));
  std::string theirs = rank == speaker ? message : std::string(static_cast<std::size_t>(len), ' ');
  DMUON_CHECK_MPI(MPI_Bcast(theirs.data(), len, MPI_CHAR, speaker, comm));
  // Did every rank fail with this very message? Then it is everybody's input: no rank prefix.
  const int same = failure == kInput && message == theirs ? 1 : 0;
  int all_same = 0;
  DMUON_CHECK_MPI(MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, comm));
  if (all_same) throw InputError(theirs);
  throw InputError(fmt::format("rank {}: {}", speaker, theirs));
}

bool all_ranks_go(MPI_Comm comm, bool go) {
  int mine = go ? 1 : 0, all = 0;
  DMUON_CHECK_MPI(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm));
  return all != 0;
}

}  // namespace dmuon::apps

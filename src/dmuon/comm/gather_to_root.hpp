#pragma once
// Gathering one value per rank on a root, for what the apps report of a whole job: each rank's
// host name, timeline or measured rate. Collective over `comm`: every rank calls with its own
// value; the root gets them in rank order, the others an empty vector.

#include <mpi.h>

#include <string>
#include <vector>

namespace dmuon::comm {

std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine, int root);
std::vector<double> gather_doubles(MPI_Comm comm, double mine, int root);
/// This process's host name (gethostname, at most 255 characters).
std::string host_name();

}  // namespace dmuon::comm

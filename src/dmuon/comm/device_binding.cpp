#include "dmuon/comm/device_binding.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <numeric>
#include <sstream>

#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/comm/first_message.hpp"
#include "dmuon/comm/gather_to_root.hpp"

namespace dmuon::comm {

namespace {

std::string joined(const std::vector<std::string>& ids) {
  std::string s;
  for (const auto& id : ids) s += (s.empty() ? "" : ", ") + id;
  return s;
}

// How many node-local ranks below `r` see exactly r's list.
int same_list_below(const std::vector<VisibleDevices>& node, std::size_t r) {
  int n = 0;
  for (std::size_t q = 0; q < r; ++q) n += node[q].bus_ids == node[r].bus_ids ? 1 : 0;
  return n;
}

// The ordinal rank r of the node takes given what is taken, or -1 with the reason in `why`.
int pick(const std::vector<VisibleDevices>& node, std::size_t r, int requested,
         const std::map<std::string, int>& taken, std::string& why) {
  const auto& ids = node[r].bus_ids;
  const int count = static_cast<int>(ids.size());
  if (requested >= 0) {
    if (requested < count) return requested;
    why = fmt::format("CUDA device {} requested but only {} visible", requested, count);
    return -1;
  }
  const int k = same_list_below(node, r) % count;
  if (taken.count(ids[static_cast<std::size_t>(k)]) == 0) return k;
  for (int j = 0; j < count; ++j)
    if (taken.count(ids[static_cast<std::size_t>(j)]) == 0) return j;
  return k;  // every GPU it sees is driven already: a real duplicate
}

}  // namespace

std::vector<DeviceChoice> choose_devices(const std::vector<VisibleDevices>& node, int requested,
                                         bool allow_shared) {
  std::vector<DeviceChoice> out(node.size());
  // The most constrained ranks first: one that sees a single GPU must get that one.
  std::vector<std::size_t> order(node.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return node[a].bus_ids.size() < node[b].bus_ids.size();
  });
  std::map<std::string, int> taken;  // bus id -> the rank driving it
  for (const std::size_t r : order) {
    const VisibleDevices& v = node[r];
    if (!v.problem.empty()) {
      out[r].problem = v.problem;
      continue;
    }
    if (v.bus_ids.empty()) {
      out[r].problem = "no CUDA device visible (0 devices)";
      continue;
    }
    std::string why;
    const int k = pick(node, r, requested, taken, why);
    if (k < 0) {
      out[r].problem = why;
      continue;
    }
    const std::string& id = v.bus_ids[static_cast<std::size_t>(k)];
    const auto it = taken.find(id);
    if (it != taken.end() && !allow_shared) {
      out[r].problem = fmt::format(
          "ranks {} and {} would both drive GPU {} (rank {} sees {}); one GPU per rank is "
          "needed: give each rank its own (CUDA_VISIBLE_DEVICES per task) or start fewer ranks "
          "per node",
          std::min(it->second, v.rank), std::max(it->second, v.rank), id, v.rank,
          joined(v.bus_ids));
      continue;
    }
    out[r].ordinal = k;
    taken.emplace(id, v.rank);
  }
  return out;
}

namespace {

// One line per rank: "<rank> !<problem>" or "<rank> <bus id> <bus id> ...".
std::string encode(const VisibleDevices& v) {
  std::string s = std::to_string(v.rank);
  if (!v.problem.empty()) {
    std::string p = v.problem;
    std::replace(p.begin(), p.end(), '\n', ' ');
    return s + " !" + p;
  }
  for (const auto& id : v.bus_ids) s += " " + id;
  return s;
}

VisibleDevices decode(const std::string& line) {
  VisibleDevices v;
  std::istringstream in(line);
  in >> v.rank;
  std::string word;
  while (in >> word) {
    if (word[0] == '!') {
      const auto bang = line.find(" !");
      v.problem = line.substr(bang + 2);
      break;
    }
    v.bus_ids.push_back(word);
  }
  return v;
}

// Every node-local rank's list, on every rank of the node, in node-rank order.
std::vector<VisibleDevices> exchange_on_node(MPI_Comm node, const VisibleDevices& mine) {
  int rank = 0;
  DMUON_CHECK_MPI(MPI_Comm_rank(node, &rank));
  std::string all;
  for (const auto& line : gather_strings(node, encode(mine), 0)) all += line + "\n";
  int len = static_cast<int>(all.size());
  DMUON_CHECK_MPI(MPI_Bcast(&len, 1, MPI_INT, 0, node));
  all.resize(static_cast<std::size_t>(len));
  DMUON_CHECK_MPI(MPI_Bcast(all.data(), len, MPI_CHAR, 0, node));
  std::vector<VisibleDevices> out;
  std::istringstream lines(all);
  for (std::string line; std::getline(lines, line);) out.push_back(decode(line));
  return out;
}

}  // namespace

DeviceBinding bind_device(MPI_Comm comm, const VisibleDevices& mine, int requested,
                          bool allow_shared) {
  MPI_Comm node = MPI_COMM_NULL;
  DMUON_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local = 0;
  DMUON_CHECK_MPI(MPI_Comm_rank(node, &local));
  std::vector<VisibleDevices> lists;
  try {
    lists = exchange_on_node(node, mine);
  } catch (...) {
    MPI_Comm_free(&node);
    throw;
  }
  DMUON_CHECK_MPI(MPI_Comm_free(&node));
  const DeviceChoice choice =
      choose_devices(lists, requested, allow_shared)[static_cast<std::size_t>(local)];
  DeviceBinding b;
  b.own_problem = choice.problem;
  b.problem = agree_first_message(!choice.problem.empty(), choice.problem, comm, &b.failed_rank);
  if (b.ok()) b.ordinal = choice.ordinal;
  return b;
}

bool shared_gpu_allowed() {
  const char* v = std::getenv("DMUON_ALLOW_SHARED_GPU");
  if (v == nullptr || std::string(v).empty() || std::string(v) == "0") return false;
  if (std::string(v) == "1") return true;
  throw InputError(fmt::format(
      "DMUON_ALLOW_SHARED_GPU='{}' is invalid (valid: 1 lets ranks share a GPU, a test aid; 0 "
      "or unset refuses)",
      v));
}

}  // namespace dmuon::comm

#pragma once
// Named rank layouts R x G x T for the reference's tensor-parallel benchmark setups
// (dmuon_inspect --layout NAME; docs/METRICS.md "Tensor parallelism"). World = R * G * T.
//
//   name       world  R  G  T   what
//   dp_only      8    1  8  1   FSDP over 8 ranks, no TP
//   hsdp_2x4     8    2  4  1   HSDP: 2 replicas of a 4-rank shard group
//   tp2          2    1  1  2   TP only
//   tp4          4    1  1  4
//   tp8          8    1  1  8
//   dp_tp2       8    1  4  2   FSDP x TP
//   dp_tp4       8    1  2  4
//   dp_tp8      16    1  2  8
//   hsdp_tp2     8    2  2  2   HSDP x TP

#include <string>
#include <string_view>
#include <vector>

namespace dmuon::plan {

struct TpLayout {
  std::string name;
  int world = 1;
  int replicate = 1;  ///< R
  int shard = 1;      ///< G
  int tp = 1;         ///< T
};

/// The table above, in that order.
const std::vector<TpLayout>& tp_layouts();

/// The layout named `name`; throws InputError naming the valid names otherwise.
const TpLayout& find_tp_layout(std::string_view name);

}  // namespace dmuon::plan

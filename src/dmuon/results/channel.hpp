#pragma once
// A stored collective channel: the `kinds` column of a run's collectives holds one name per
// (communicator, kind) — the shard group's by kind name ("broadcast"), the others prefixed by
// their group ("replicate_reduce", "world_all_reduce", "tp_gather"), the names
// engine::channel_name gives. Files keep those names; this is the one place results code turns
// a stored name back into its typed (group, kind).

#include <optional>
#include <string>

#include "dmuon/base/rank_grid.hpp"
#include "dmuon/comm/collective_counters.hpp"

namespace dmuon::results {

struct Channel {
  CommGroup group = CommGroup::shard;
  comm::CollectiveKind kind = comm::CollectiveKind::broadcast;
};

/// The stored name of a channel ("broadcast", "replicate_reduce", "tp_gather", ...).
std::string channel_text(const Channel& c);
/// The channel a stored name denotes; nullopt for a name no channel has.
std::optional<Channel> parse_channel(const std::string& name);

}  // namespace dmuon::results

#include "dmuon/results/channel.hpp"

namespace dmuon::results {

std::string channel_text(const Channel& c) {
  const std::string kind = comm::collective_kind_name(c.kind);
  return c.group == CommGroup::shard ? kind : comm_group_name(c.group) + ("_" + kind);
}

std::optional<Channel> parse_channel(const std::string& name) {
  for (const CommGroup g : kAllCommGroups)
    for (const comm::CollectiveKind k : comm::kAllCollectiveKinds)
      if (channel_text({g, k}) == name) return Channel{g, k};
  return std::nullopt;
}

}  // namespace dmuon::results

#include "common/run_agreement.hpp"

#include <fmt/format.h>

#include <climits>
#include <cstdint>

#include "dmuon/base/check.hpp"
#include "dmuon/base/error.hpp"
#include "dmuon/comm/first_message.hpp"
#include "dmuon/comm/hash.hpp"

namespace dmuon::apps {
namespace {

constexpr char kKeyEnd = '\x1f', kLineEnd = '\n';

// Backslashes and control characters escaped, so a line stays one line and the separators
// above cannot appear inside a key or value (names in a topology file may hold any text).
std::string escaped(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\')
      out += "\\\\";
    else if (u < 0x20 || u == 0x7f)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  return out;
}

std::string quoted(std::string_view s) {
  return fmt::format("'{}'", s);
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string attention_text(const model::AttentionGeometry& a) {
  if (a.kind == model::AttentionKind::none) return "none";
  std::string s = model::attention_kind_name(a.kind);
  if (a.kind == model::AttentionKind::mla)
    s += fmt::format(" heads {} q_lora {} kv_lora {} qk_nope {} qk_rope {} v_head {}", a.heads,
                     a.q_lora, a.kv_lora, a.qk_nope, a.qk_rope, a.v_head);
  else
    s += fmt::format(" heads {} kv_heads {} head_dim {}", a.heads, a.kv_heads, a.head_dim);
  return s + fmt::format("{}{}", a.causal ? " causal" : " bidirectional", a.rope ? " rope" : "");
}

void describe_geometry(const std::optional<model::ModelGeometry>& g, RunDescription& d) {
  if (!g) {
    d.add("topology: geometry", "none");
    return;
  }
  d.add("topology: geometry",
        fmt::format("{} stacks, embedding {}, final_norm {} ({}), head {}, vision_tokens {}, "
                    "action_tokens {}",
                    g->stacks.size(), quoted(g->embedding), quoted(g->final_norm),
                    model::norm_kind_name(g->final_norm_kind), quoted(g->head), g->vision_tokens,
                    g->action_tokens));
  for (const auto& s : g->stacks) {
    std::string v = fmt::format(
        "blocks {}{}, tokens {}, hidden {}, norm {}, residual {}, attention {} {}, mlp {}, "
        "activation {}",
        quoted(s.blocks), s.single_block ? " (one block)" : "", model::token_stream_name(s.tokens),
        s.hidden, model::norm_kind_name(s.norm), s.residual ? "on" : "off",
        attention_text(s.attention), fmt::join(s.attention_modules, ","),
        fmt::join(s.mlp_modules, ","), model::activation_name(s.activation));
    if (s.moe)
      v += fmt::format(", moe top_k {} {} router {} experts {} shared {}", s.moe->top_k,
                       model::router_scoring_name(s.moe->scoring), quoted(s.moe->router),
                       quoted(s.moe->experts), quoted(s.moe->shared));
    d.add(fmt::format("topology: geometry stack {}", quoted(s.name)), v);
  }
  for (const auto& [prefix, stream] : g->streams)
    d.add(fmt::format("topology: geometry stream of {}", quoted(prefix)),
          model::token_stream_name(stream));
}

// "key = value" as the error shows a line.
std::string line_text(const std::pair<std::string, std::string>& l) {
  return l.first + " = " + l.second;
}

}  // namespace

void RunDescription::add(std::string_view key, std::string_view value) {
  lines_.emplace_back(escaped(key), escaped(value));
}

std::string RunDescription::text() const {
  std::string t;
  for (const auto& [k, v] : lines_) {
    t += k;
    t += kKeyEnd;
    t += v;
    t += kLineEnd;
  }
  return t;
}

RunDescription RunDescription::from_text(std::string_view text) {
  RunDescription d;
  while (!text.empty()) {
    const auto eol = text.find(kLineEnd);
    const auto line = text.substr(0, eol);
    const auto sep = line.find(kKeyEnd);
    d.lines_.emplace_back(std::string(line.substr(0, sep)),
                          sep == std::string_view::npos ? "" : std::string(line.substr(sep + 1)));
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
  }
  return d;
}

void describe_topology(const model::Topology& topo, RunDescription& d) {
  const auto& tree = topo.tree;
  d.add("topology", topo.name);
  d.add("topology: preset", topo.preset.empty() ? "(none)" : topo.preset);
  for (const auto& [key, value] : topo.dims) d.add(fmt::format("topology: dim {}", key), value);
  d.add("topology: dedicate", topo.dedicate_rule);
  d.add("topology: modules", tree.num_modules());
  d.add("topology: parameters", tree.num_parameters());
  d.add("topology: root type", tree.module(model::ModuleTree::root).type);
  for (int m : tree.preorder()) {
    if (m == model::ModuleTree::root) continue;
    const auto& mod = tree.module(m);
    d.add(fmt::format("topology: module {} type", quoted(mod.path)), mod.type);
    if (mod.routed_top_k > 0)
      d.add(fmt::format("topology: module {} routed top_k", quoted(mod.path)), mod.routed_top_k);
  }
  for (int pid : tree.parameter_order()) {
    const auto& p = tree.parameter(pid);
    const std::string key = fmt::format("topology: parameter {}", quoted(p.name));
    d.add(key + " shape", shape_text(p.shape));
    d.add(key + " dtype", model::dtype_name(p.dtype));
    std::vector<std::string> names;
    for (const auto& h : p.holders) names.push_back(tree.holder_name(h));
    d.add(key + " names", fmt::format("{}", fmt::join(names, ", ")));
  }
  describe_geometry(topo.geometry, d);
}

std::string first_difference(const RunDescription& mine, const RunDescription& theirs,
                             int their_rank) {
  const auto& a = mine.lines();
  const auto& b = theirs.lines();
  for (std::size_t i = 0; i < a.size() || i < b.size(); ++i) {
    if (i >= b.size()) return fmt::format("{} (rank {}: (none))", line_text(a[i]), their_rank);
    if (i >= a.size())
      return fmt::format("{} = (none) (rank {}: {})", b[i].first, their_rank, b[i].second);
    if (a[i] == b[i]) continue;
    if (a[i].first == b[i].first)
      return fmt::format("{} = {} (rank {}: {})", a[i].first, a[i].second, their_rank, b[i].second);
    return fmt::format("{} (rank {}: {})", line_text(a[i]), their_rank, line_text(b[i]));
  }
  return "";
}

void agree_on_run(MPI_Comm comm, const RunDescription& mine) {
  int rank = 0;
  DMUON_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  const std::string text = mine.text();
  const std::uint64_t hash = comm::fnv1a_64(text);
  // MIN of the hash and of its complement: the smallest and the largest hash in one call.
  std::uint64_t local[2] = {hash, ~hash}, low[2] = {0, 0};
  DMUON_CHECK_MPI(MPI_Allreduce(local, low, 2, MPI_UINT64_T, MPI_MIN, comm));
  if (low[0] == ~low[1]) return;
  // Some rank differs: rank 0's lines to every rank, each finds its first difference, and the
  // lowest differing rank speaks. Every rank takes this branch (it depends on `low` alone).
  std::uint64_t head[2] = {text.size(), hash};  // rank 0's length and hash
  DMUON_CHECK_MPI(MPI_Bcast(head, 2, MPI_UINT64_T, 0, comm));
  std::string diff;
  if (head[0] <= static_cast<std::uint64_t>(INT_MAX)) {
    std::string theirs = rank == 0 ? text : std::string(static_cast<std::size_t>(head[0]), '\0');
    DMUON_CHECK_MPI(MPI_Bcast(theirs.data(), static_cast<int>(head[0]), MPI_CHAR, 0, comm));
    if (rank != 0 && theirs != text)
      diff = first_difference(mine, RunDescription::from_text(theirs), 0);
  } else if (hash != head[1]) {
    // Too long to send in one call (a model of millions of modules): name the hashes only.
    diff = fmt::format("run description hash {:016x} (rank 0: {:016x})", hash, head[1]);
  }
  int first = -1;
  const std::string message = comm::agree_first_message(!diff.empty(), diff, comm, &first);
  if (first < 0)  // cannot happen: a differing hash has a differing line
    throw InputError("the ranks resolved different runs (their descriptions' hashes differ)");
  throw InputError(fmt::format("rank {} resolved a different run than rank 0: {}", first, message));
}

}  // namespace dmuon::apps

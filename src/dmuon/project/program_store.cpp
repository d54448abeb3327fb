#include "dmuon/project/program_store.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace dmuon::project {
namespace {

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

std::uint64_t hash_of(const Instruction& in) {
  std::uint64_t seconds = 0, sm_seconds = 0;
  std::memcpy(&seconds, &in.seconds, sizeof seconds);
  std::memcpy(&sm_seconds, &in.sm_seconds, sizeof sm_seconds);
  std::uint64_t h = mix(in.kind | (std::uint64_t{in.switches} << 8), in.phase);
  h = mix(h, (std::uint64_t{in.exposed} << 24) | (std::uint64_t{in.stream} << 16) |
                 (std::uint64_t{in.comm} << 8) | in.dep_comm);
  h = mix(h, static_cast<std::uint32_t>(in.back));
  h = mix(h, static_cast<std::uint32_t>(in.dep_back));
  h = mix(h, seconds);
  h = mix(h, sm_seconds);
  return mix(h, reinterpret_cast<std::uintptr_t>(in.spec));
}

// A chunk ends after an issue whose batch (group, op) hashes to 0: the same points on every
// rank that issues the same batches (a pointer would do too, but would move the cuts, and
// with them the memory, from run to run).
bool ends_chunk(const Instruction& in) {
  if (in.kind != Instruction::issue) return false;
  std::uint64_t h =
      mix(static_cast<std::uint64_t>(in.spec->group) + 1, static_cast<std::uint64_t>(in.spec->op));
  h *= 0xff51afd7ed558ccdULL;
  return (h >> 40) % ProgramStore::kChunkIssues == 0;
}

}  // namespace

ProgramStore::ProgramStore(std::initializer_list<RankProgram> programs) {
  for (const auto& p : programs) add(p);
}

std::uint32_t ProgramStore::intern(const Instruction* begin, const Instruction* end) {
  std::uint64_t h = static_cast<std::uint64_t>(end - begin);
  for (const Instruction* i = begin; i != end; ++i) h = mix(h, hash_of(*i));
  const auto [lo, hi] = by_hash_.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    const Instruction* b = code_.data() + chunk_begin_[it->second];
    const Instruction* e = code_.data() + chunk_begin_[it->second + 1];
    if (std::equal(begin, end, b, e)) return it->second;
  }
  const auto id = static_cast<std::uint32_t>(chunk_count());
  if (chunk_count() >= UINT32_MAX) throw std::length_error("ProgramStore: too many chunks");
  code_.insert(code_.end(), begin, end);
  chunk_begin_.push_back(code_.size());
  by_hash_.emplace(h, id);
  return id;
}

bool ProgramStore::same_as(int like, std::size_t index, const Instruction* begin,
                           const Instruction* end, std::uint32_t& chunk) const {
  if (like < 0 || like >= static_cast<int>(programs_.size())) return false;
  const auto& previous = at(like).chunks;
  if (index >= previous.size()) return false;
  const std::uint32_t c = previous[index];
  const Instruction* b = code_.data() + chunk_begin_[c];
  const Instruction* e = code_.data() + chunk_begin_[c + 1];
  if (!std::equal(begin, end, b, e)) return false;
  chunk = c;
  return true;
}

int ProgramStore::add(const RankProgram& program, int like) {
  if (like < 0) like = static_cast<int>(programs_.size()) - 1;
  Program p;
  p.hook_calls = program.hook_calls;
  p.hook_comm_calls = program.hook_comm_calls;
  const Instruction* begin = program.code.data();
  const Instruction* end = begin + program.code.size();
  const Instruction* from = begin;
  auto take = [&](const Instruction* to) {
    std::uint32_t c = 0;
    p.chunks.push_back(same_as(like, p.chunks.size(), from, to, c) ? c : intern(from, to));
    from = to;
  };
  for (const Instruction* i = begin; i != end; ++i)
    if (ends_chunk(*i)) take(i + 1);
  if (from != end) take(end);
  p.chunks.shrink_to_fit();
  programs_.push_back(std::move(p));
  return static_cast<int>(programs_.size()) - 1;
}

}  // namespace dmuon::project

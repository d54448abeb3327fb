#pragma once
// The compiled programs of a world, stored once per distinct run of instructions.
//
// A DMuon rank's program is the same as every other rank's except around the parameters it
// owns (their Newton–Schulz, updates and column collectives); at 16,384 ranks of a model with
// 15,000 hook sites, per-rank copies would take tens of GB. So each program is cut into
// chunks at content-defined points (after an issue whose batch's group and op hash to 0 mod
// kChunkIssues: the same points on every rank wherever their code is the same, whatever came
// before), and each distinct chunk is kept once. Instructions are position-independent
// (rank_program.hpp), so a shared chunk means the same on every rank that runs it.
// Memory: one chunk-id list per program (about issues / kChunkIssues entries) plus the
// distinct chunks. Time: programs of ranks alike (the previous rank, or one of the same sample
// class) mostly cut at the same points into the same chunks, so each chunk is first compared
// with that program's chunk at the same index (a memory compare) and hashed only when it
// differs.

#include <cstdint>
#include <initializer_list>
#include <unordered_map>
#include <vector>

#include "dmuon/project/rank_program.hpp"

namespace dmuon::project {

class ProgramStore {
 public:
  /// Expected issues per chunk: chunk-id lists shrink with it, distinct chunks grow with it.
  static constexpr std::uint64_t kChunkIssues = 16;

  ProgramStore() = default;
  ProgramStore(std::initializer_list<RankProgram> programs);

  /// Stores a program; returns its index. `like`: a stored program it probably resembles
  /// (chunks are compared with its chunks at the same index before they are hashed); -1: the
  /// last one stored.
  int add(const RankProgram& program, int like = -1);

  std::size_t size() const { return programs_.size(); }
  bool empty() const { return programs_.empty(); }
  std::int64_t hook_calls(int program) const { return at(program).hook_calls; }
  std::int64_t hook_comm_calls(int program) const { return at(program).hook_comm_calls; }

  /// A program's chunks in order, and a chunk's instructions: the replay moves ranks whose
  /// programs run the same chunk together (replay.cpp).
  const std::vector<std::uint32_t>& chunks_of(int program) const { return at(program).chunks; }
  const Instruction* chunk_begin(std::uint32_t chunk) const {
    return code_.data() + chunk_begin_[chunk];
  }
  const Instruction* chunk_end(std::uint32_t chunk) const {
    return code_.data() + chunk_begin_[chunk + 1];
  }

  /// Distinct chunks and the instructions they hold (memory accounting).
  std::size_t chunk_count() const { return chunk_begin_.size() - 1; }
  std::size_t instruction_count() const { return code_.size(); }

 private:
  struct Program {
    std::vector<std::uint32_t> chunks;
    std::int64_t hook_calls = 0, hook_comm_calls = 0;
  };
  const Program& at(int program) const { return programs_[static_cast<std::size_t>(program)]; }
  std::uint32_t intern(const Instruction* begin, const Instruction* end);
  /// The chunk program `like` has at `index`, when it holds exactly [begin, end).
  bool same_as(int like, std::size_t index, const Instruction* begin, const Instruction* end,
               std::uint32_t& chunk) const;

  std::vector<Program> programs_;
  std::vector<Instruction> code_;            // the distinct chunks, back to back
  std::vector<std::size_t> chunk_begin_{0};  // chunk c: [begin[c], begin[c + 1])
  std::unordered_multimap<std::uint64_t, std::uint32_t> by_hash_;
};

}  // namespace dmuon::project

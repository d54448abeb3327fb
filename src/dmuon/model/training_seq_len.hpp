#pragma once
// The sequence length a built-in LLM preset was (pre-)trained at, from its model's published
// training report: what dmuon_project projects when --seq-len is not given, instead of a
// parameter-only step of one token per sample (a toy answer for a real model).

#include <cstdint>
#include <optional>
#include <string>

namespace dmuon::model {

struct TrainingSeqLen {
  std::int64_t tokens = 0;
  std::string source;  ///< where the figure comes from ("Llama 3 report: 8,192-token sequences")
};

/// The preset's training sequence length; none for toy presets (tiny, mini), the non-LLM
/// topologies and unknown names.
std::optional<TrainingSeqLen> training_seq_len(const std::string& topology,
                                               const std::string& preset);

}  // namespace dmuon::model

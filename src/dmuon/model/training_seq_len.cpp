#include "dmuon/model/training_seq_len.hpp"

#include <map>
#include <utility>

namespace dmuon::model {

std::optional<TrainingSeqLen> training_seq_len(const std::string& topology,
                                               const std::string& preset) {
  // Pre-training lengths (before any long-context extension), as the reports state them.
  static const std::map<std::pair<std::string, std::string>, TrainingSeqLen> table = {
      {{"llm", "llama3-8b"}, {8192, "Llama 3 report: pre-trained on 8,192-token sequences"}},
      {{"llm", "llama3.2-3b"}, {8192, "Llama 3 family: pre-trained on 8,192-token sequences"}},
      {{"llm", "llama3-70b"}, {8192, "Llama 3 report: pre-trained on 8,192-token sequences"}},
      {{"llm", "llama3.1-405b"}, {8192, "Llama 3 report: pre-trained on 8,192-token sequences"}},
      {{"llm", "llama2-13b"}, {4096, "Llama 2 report: context length 4,096"}},
      {{"llm", "llama2-70b"}, {4096, "Llama 2 report: context length 4,096"}},
      {{"llm", "qwen2.5-1.5b"}, {4096, "Qwen2.5 report: pre-training context 4,096 tokens"}},
      {{"llm", "qwen2.5-7b"}, {4096, "Qwen2.5 report: pre-training context 4,096 tokens"}},
      {{"llm", "qwen2.5-14b"}, {4096, "Qwen2.5 report: pre-training context 4,096 tokens"}},
      {{"moe-llm", "mixtral-8x7b"}, {32768, "Mixtral report: trained with a 32k-token context"}},
      {{"moe-llm", "deepseek-v3"},
       {4096, "DeepSeek-V3 report: maximum sequence length 4K in pre-training"}},
  };
  const auto it = table.find({topology, preset});
  if (it == table.end()) return std::nullopt;
  return it->second;
}

}  // namespace dmuon::model

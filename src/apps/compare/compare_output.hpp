#pragma once
// What dmuon_compare prints of a comparison: the nccl-tests-style table (the files, the rules,
// a row per run with its mismatches and timing verdicts, the totals) or one JSON object.

#include <string>
#include <vector>

#include "dmuon/results/compare.hpp"
#include "dmuon/results/run_record.hpp"

namespace dmuon::apps::compare {

void print_table(const std::vector<std::string>& pas, const std::vector<results::ResultsFile>& fa,
                 const std::vector<std::string>& pbs, const std::vector<results::ResultsFile>& fb,
                 const results::Comparison& c, bool wide);

void print_json(const std::vector<std::string>& pas, const std::vector<std::string>& pbs,
                const results::Comparison& c);

}  // namespace dmuon::apps::compare

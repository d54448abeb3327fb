#pragma once
// The run summary's named values (attributes of /runs/<i>/summary): each declared once here
// with its unit and stored type, and used by name everywhere a summary value is written or
// read. The summary stays an open map (RunRecord::summary): tools add per-phase `<phase>_ms`
// and per-term memory values under names built from the engine's and the model's own tables.

#include <string>
#include <vector>

namespace dmuon::results {

enum class SummaryKind {
  real,   ///< float64
  count,  ///< counts, bytes and 0/1 verdicts: int64 when integral (RunRecord::summary)
  text,   ///< str (RunRecord::summary_text)
};

struct SummaryField {
  const char* name;
  const char* unit;  ///< "" for verdicts and text
  SummaryKind kind;
};

namespace summary_key {
inline constexpr SummaryField step_ms{"step_ms", "ms", SummaryKind::real};
inline constexpr SummaryField optimizer_ms{"optimizer_ms", "ms", SummaryKind::real};
inline constexpr SummaryField exposed_comm_ms{"exposed_comm_ms", "ms", SummaryKind::real};
inline constexpr SummaryField tokens_per_s{"tokens_per_s", "tokens/s", SummaryKind::real};
inline constexpr SummaryField updated_params_per_s{"updated_params_per_s", "elements/s",
                                                   SummaryKind::real};
inline constexpr SummaryField ns_tflops{"ns_tflops", "TFLOP/s", SummaryKind::real};
inline constexpr SummaryField hook_sites{"hook_sites", "sites", SummaryKind::count};
inline constexpr SummaryField hook_calls_per_step{"hook_calls_per_step", "calls/step",
                                                  SummaryKind::count};
inline constexpr SummaryField hook_calls_formula{"hook_calls_formula", "calls/step",
                                                 SummaryKind::count};
/// float64 in every file written so far: kept so for the files' sake.
inline constexpr SummaryField hooks_communicating_per_step{"hooks_communicating_per_step",
                                                           "calls/step", SummaryKind::real};
inline constexpr SummaryField dedicated_bytes{"dedicated_bytes", "B", SummaryKind::count};
inline constexpr SummaryField bytes_per_rank_max{"bytes_per_rank_max", "B/step",
                                                 SummaryKind::count};
inline constexpr SummaryField formula_bytes_per_rank_max{"formula_bytes_per_rank_max", "B/step",
                                                         SummaryKind::count};
inline constexpr SummaryField audit_ok{"audit_ok", "", SummaryKind::count};
inline constexpr SummaryField check_passed{"check_passed", "", SummaryKind::count};
inline constexpr SummaryField max_rel_error{"max_rel_error", "", SummaryKind::real};
inline constexpr SummaryField idle_slots{"idle_slots", "slots", SummaryKind::count};
inline constexpr SummaryField timings_source{"timings_source", "", SummaryKind::text};
inline constexpr SummaryField audit{"audit", "", SummaryKind::text};
inline constexpr SummaryField check{"check", "", SummaryKind::text};
}  // namespace summary_key

/// Every summary value declared above (a new one: its declaration and its entry here).
inline const std::vector<SummaryField>& summary_fields() {
  using namespace summary_key;
  static const std::vector<SummaryField> fields = {
      step_ms,
      optimizer_ms,
      exposed_comm_ms,
      tokens_per_s,
      updated_params_per_s,
      ns_tflops,
      hook_sites,
      hook_calls_per_step,
      hook_calls_formula,
      hooks_communicating_per_step,
      dedicated_bytes,
      bytes_per_rank_max,
      formula_bytes_per_rank_max,
      audit_ok,
      check_passed,
      max_rel_error,
      idle_slots,
      timings_source,
      audit,
      check,
  };
  return fields;
}

/// True for summary names that hold counts, bytes or 0/1 verdicts (stored as int64):
/// the fields of kind `count` above.
bool is_count_summary(const std::string& name);

}  // namespace dmuon::results

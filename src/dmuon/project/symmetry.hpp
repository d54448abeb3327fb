#pragma once
// How the projection builds its rank programs: every rank's own (full), or one per class of
// ranks that run the same program (reduced, the default; world_programs.hpp).

namespace dmuon::project {

enum class Symmetry { full, reduced };
const char* symmetry_name(Symmetry s);

}  // namespace dmuon::project

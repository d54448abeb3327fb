#pragma once
// Where the shipped configs (configs/<topology>.yaml: a topology's default boundary sweep) are,
// found at run time relative to the executable, so an installed tree works anywhere and nothing
// points back into the source tree:
//   1. $DMUON_CONFIG_DIR when set (an explicit choice; used even when it does not exist),
//   2. <dir of the executable>/../share/dmuon/configs (the install layout; the build tree
//      mirrors it with a link to the source configs, made at configure time),
//   3. "" (none: callers fall back to their built-in defaults).

#include <string>

namespace dmuon::apps {

std::string config_dir();

}  // namespace dmuon::apps

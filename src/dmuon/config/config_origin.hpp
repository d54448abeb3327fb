#pragma once
// Where the flags a --config file contributed came from, so an error about one of their values
// names the file, line and key. Kept apart from the YAML reader: every tool's error printer
// (apps/common/run_main.cpp) reads it, also in builds without yaml-cpp (the GPU check's).

#include <string>
#include <vector>

namespace dmuon::config {

/// Forgets what an earlier expansion recorded (ExpandedArgs starts with it).
void forget_config_origins();
/// Flag `flag` (e.g. "--steps") came from key `key` at `line` of `path` with `values`.
void note_config_origin(const std::string& path, const std::string& flag, int line,
                        const std::string& key, const std::vector<std::string>& values);
/// For an error message that names a recorded flag (its first "--flag" token that came from
/// the file, not from the command line) or quotes one of its values: " (config FILE:LINE, key
/// 'k')"; "" otherwise, or when the message already names the file.
std::string config_origin_note(const std::string& message);

}  // namespace dmuon::config

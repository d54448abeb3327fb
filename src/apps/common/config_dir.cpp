#include "common/config_dir.hpp"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace dmuon::apps {

std::string config_dir() {
  if (const char* env = std::getenv("DMUON_CONFIG_DIR"); env != nullptr && *env != '\0') return env;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path dir = exe.parent_path().parent_path() / "share" / "dmuon" / "configs";
  if (fs::is_directory(dir, ec)) return fs::canonical(dir, ec).string();
  return "";
}

}  // namespace dmuon::apps

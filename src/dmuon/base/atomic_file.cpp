#include "dmuon/base/atomic_file.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "dmuon/base/error.hpp"

namespace dmuon {
namespace {

// Writes and closes; false (errno kept) when any part fails.
bool write_all(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return false;
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  return static_cast<bool>(out);
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view text, std::string_view what) {
  const auto fail = [&](const char* reason) {
    throw InputError(fmt::format("cannot write {} '{}': {}", what, path, reason));
  };
  if (path.empty()) fail("the path is empty");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    // A directory is an error; a device or pipe (/dev/stdout, a FIFO) is written in place:
    // renaming a temporary onto it would replace the node itself.
    if (S_ISDIR(st.st_mode)) fail("it is a directory");
    errno = 0;
    if (!write_all(path, text)) fail(errno != 0 ? std::strerror(errno) : "write failed");
    return;
  }
  const std::string tmp = path + ".tmp";
  errno = 0;
  if (!write_all(tmp, text)) {
    const int err = errno;
    std::remove(tmp.c_str());
    fail(err != 0 ? std::strerror(err) : "write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    fail(std::strerror(err));
  }
}

void check_writable(const std::string& path, std::string_view what) {
  namespace fs = std::filesystem;
  auto fail = [&](const std::string& reason) {
    throw InputError(fmt::format("cannot write {} '{}': {}", what, path, reason));
  };
  if (path.empty()) fail("empty path");
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) fail("it is a directory");
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::exists(dir, ec)) fail(fmt::format("directory '{}' does not exist", dir.string()));
  if (!fs::is_directory(dir, ec)) fail(fmt::format("'{}' is not a directory", dir.string()));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return;  // a device or pipe
  const std::string probe = fmt::format("{}.probe.{}", path, static_cast<long>(::getpid()));
  std::FILE* fp = std::fopen(probe.c_str(), "wb");
  if (fp == nullptr) fail(std::strerror(errno));
  std::fclose(fp);
  std::remove(probe.c_str());
}

}  // namespace dmuon

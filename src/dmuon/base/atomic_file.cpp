#include "dmuon/base/atomic_file.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "dmuon/base/error.hpp"

namespace dmuon {

void write_file_atomically(const std::string& path, std::string_view text, std::string_view what) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw InputError(fmt::format("cannot write {} '{}': {}", what, path, std::strerror(errno)));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      throw InputError(fmt::format("cannot write {} '{}': write failed", what, path));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw InputError(fmt::format("cannot write {} '{}': {}", what, path, std::strerror(err)));
  }
}

}  // namespace dmuon

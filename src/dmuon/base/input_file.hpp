#pragma once
// Reading a user-named input file without hanging or exhausting memory: the path must name a
// regular file (a FIFO would block the read forever, a directory or device is never meant),
// its size is checked against a limit before anything is allocated, and every failure is one
// InputError line naming the path and the cause (errno text).

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "dmuon/base/abbreviate.hpp"
#include "dmuon/base/error.hpp"

namespace dmuon {

namespace detail {

inline const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Closes the descriptor on every path out.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace detail

/// The whole content of the regular file `path`. `what` names the file's role in messages
/// ("topology file"). Throws InputError when the path cannot be opened, is not a regular
/// file, is larger than `max_bytes`, or a read fails.
inline std::string read_regular_file(const std::string& path, const char* what,
                                     std::int64_t max_bytes) {
  const std::string shown = abbreviate_value(path, 200);
  auto fail = [&](const std::string& why) {
    return InputError(fmt::format("cannot read {} '{}': {}", what, shown, why));
  };
  // O_NONBLOCK: opening a FIFO that has no writer returns at once instead of blocking; the
  // fstat below then refuses it. Checking the open descriptor (not the path) leaves no window
  // for the path to change between the check and the read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw fail(std::strerror(errno));
  detail::FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw fail(std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw fail(fmt::format("{} (valid: a regular file)", detail::file_kind(st.st_mode)));
  if (st.st_size > max_bytes)
    throw fail(fmt::format("{} bytes is larger than the limit of {} bytes",
                           static_cast<std::int64_t>(st.st_size), max_bytes));
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw fail(std::strerror(errno));
    if (n == 0) break;  // shrank while reading: keep what is there
    done += static_cast<std::size_t>(n);
  }
  text.resize(done);
  return text;
}

}  // namespace dmuon

#pragma once
// Writing a text file so that a reader never sees it half-written: the text goes to
// "<path>.tmp" and is renamed onto <path> (atomic on POSIX) only once it is all written. An
// existing device or pipe (/dev/stdout, a FIFO) is written in place instead, never replaced.

#include <string>
#include <string_view>

namespace dmuon {

/// Writes `text` to `path` atomically. Throws InputError naming `what` (e.g. "trace file"),
/// the path and the system's reason; the temporary is removed on failure.
void write_file_atomically(const std::string& path, std::string_view text, std::string_view what);

/// Before a run: throws InputError("cannot write <what> '<path>': <reason>") unless a file can
/// be created at `path` (its directory exists and is writable, it is not a directory).
void check_writable(const std::string& path, std::string_view what);

}  // namespace dmuon

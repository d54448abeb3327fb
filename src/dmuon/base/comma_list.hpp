#pragma once
// Flags that take "a,b,c" as well as repeated values (--method, --owner-strategy).

#include <string>
#include <vector>

namespace dmuon {

/// The non-empty comma-separated items of every entry of `args`, in order ("a,,b" -> a, b).
std::vector<std::string> split_comma_lists(const std::vector<std::string>& args);

}  // namespace dmuon

#pragma once
// Flags that take "a,b,c" as well as repeated values (--method, --owner-strategy).

#include <string>
#include <vector>

namespace dmuon {

/// The comma-separated items of every entry of `args`, in order. With `flag` (e.g. "--method")
/// an empty item ("a,", "a,,b", "") is an InputError naming the flag and the value; without,
/// empty items are dropped ("a,,b" -> a, b).
std::vector<std::string> split_comma_lists(const std::vector<std::string>& args,
                                           const char* flag = nullptr);

}  // namespace dmuon

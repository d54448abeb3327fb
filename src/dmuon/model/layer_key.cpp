#include "dmuon/model/layer_key.hpp"

#include <vector>

namespace dmuon::model {

std::optional<std::string> layer_key(std::string_view name) {
  // Walk segments without allocating; exact segment match only ("sublayers" never matches).
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t dot = name.find('.', start);
    if (dot == std::string_view::npos) break;  // last segment has no follower
    std::string_view seg = name.substr(start, dot - start);
    if (seg == "layers" || seg == "blocks") {
      std::size_t next_end = name.find('.', dot + 1);
      std::string_view next =
          name.substr(dot + 1, next_end == std::string_view::npos ? std::string_view::npos
                                                                  : next_end - dot - 1);
      std::string_view prefix = start == 0 ? std::string_view("_root") : name.substr(0, start - 1);
      std::string key;
      key.reserve(prefix.size() + seg.size() + next.size() + 2);
      key.append(prefix).append(".").append(seg).append(".").append(next);
      return key;
    }
    start = dot + 1;
  }
  return std::nullopt;
}

std::optional<std::string> layer_key_module_path(std::string_view path) {
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    if (dot == std::string_view::npos) return std::nullopt;  // last segment has no follower
    const std::string_view seg = path.substr(start, dot - start);
    if (seg == "layers" || seg == "blocks") {
      const std::size_t next_end = path.find('.', dot + 1);
      return std::string(path.substr(0, next_end));
    }
    start = dot + 1;
  }
}

}  // namespace dmuon::model

#pragma once
// FNV-1a 64-bit: a cheap, stable, platform-independent fingerprint of a plan (sites, owners,
// buffer sizes) so that ranks can check they built the same plan before communicating.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dmuon::comm {

inline constexpr std::uint64_t kFnv1aOffset = 0xcbf29ce484222325ULL;
inline constexpr std::uint64_t kFnv1aPrime = 0x100000001b3ULL;

/// FNV-1a over raw bytes; pass a previous result as `seed` to hash a sequence of fields.
inline std::uint64_t fnv1a_64(const void* data, std::size_t bytes,
                              std::uint64_t seed = kFnv1aOffset) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = seed;
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= kFnv1aPrime;
  }
  return h;
}

/// FNV-1a over the characters of a string (no terminator).
constexpr std::uint64_t fnv1a_64(std::string_view text, std::uint64_t seed = kFnv1aOffset) {
  std::uint64_t h = seed;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= kFnv1aPrime;
  }
  return h;
}

/// Mixes an integer into a running hash (its 8 little-endian bytes, independent of host order).
constexpr std::uint64_t fnv1a_64_u64(std::uint64_t value, std::uint64_t seed = kFnv1aOffset) {
  std::uint64_t h = seed;
  for (int i = 0; i < 8; ++i) {
    h ^= (value >> (8 * i)) & 0xffU;
    h *= kFnv1aPrime;
  }
  return h;
}

}  // namespace dmuon::comm

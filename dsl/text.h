// Wording helpers for messages, shared by the front end and the runtime.
#pragma once

#include <cstdint>
#include <string>

namespace kdsl {

/// A count and its noun, singular for exactly one: "1 chunk", "0 chunks", "8 chunks".
inline std::string counted(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace kdsl

// Small text helpers shared by the option and environment readers.
#pragma once

#include <cctype>
#include <string>

#include "dsl/text.h"  // counted

namespace kdsl {

/// `s` without the spaces and tabs around it.
inline std::string trim_blanks(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

/// An environment word as compared: spaces and tabs around it removed, lower case
/// (KDSL_CACHE=" Off " is "off").
inline std::string env_word(const std::string& s) {
  std::string w = trim_blanks(s);
  for (char& c : w) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return w;
}

}  // namespace kdsl

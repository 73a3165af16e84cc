// Environment variables set for a scope (a test), restored afterwards to what they were: a test
// that sets one leaves the rest of the run (and a variable the caller set for the whole run) as it
// found them.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace kdsl::testing {

class ScopedEnv {
 public:
  /// Sets `name` to `value` (null: unsets it).
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    set(value);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

  /// A new value for the rest of the scope (null: unset).
  void set(const char* value) {
    if (value != nullptr) {
      setenv(name_.c_str(), value, 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

/// KDSL_SCAN_SCHEDULE for a scope ("", read as unset: the scheduler's defaults).
class ScanScheduleEnv : public ScopedEnv {
 public:
  explicit ScanScheduleEnv(const char* value) : ScopedEnv("KDSL_SCAN_SCHEDULE", value) {}
};

}  // namespace kdsl::testing

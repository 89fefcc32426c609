// SVDQ_* environment variables, parsed strictly: a malformed value is an error naming the variable, never ignored.
#pragma once
#include <optional>
#include <string>

namespace svdq::env {

// Booleans accept 1/0/true/false/yes/no (any case); unset -> fallback; anything else throws svdq::Error.
bool get_bool(const char* name, bool fallback);
// Unset or empty -> nullopt.
std::optional<std::string> get_string(const char* name);
// A decimal integer in [lo, hi]; unset or empty -> nullopt; anything else throws svdq::Error naming the variable.
std::optional<long long> get_int(const char* name, long long lo, long long hi);

// Changes one variable for a scope (tools and tests that steer the router) and restores its previous value, or its
// absence, when the scope ends.
class ScopedVar {
 public:
  explicit ScopedVar(const char* name);
  ~ScopedVar();
  ScopedVar(const ScopedVar&) = delete;
  ScopedVar& operator=(const ScopedVar&) = delete;
  void set(const std::string& value) const;
  void unset() const;

 private:
  std::string name_;
  bool had_;
  std::string old_;
};

}  // namespace svdq::env

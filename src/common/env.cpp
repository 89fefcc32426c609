#include "common/env.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "svdq/error.hpp"

namespace svdq::env {

bool get_bool(const char* name, bool fallback) {
  const char* raw = std::getenv(name);
  if (!raw) return fallback;
  std::string v(raw);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "1" || v == "true" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "no") return false;
  throw Error(ErrorCode::InvalidArgument, std::string("environment variable ") + name + "='" + raw +
                                              "': must be one of 1/0/true/false/yes/no");
}

std::optional<std::string> get_string(const char* name) {
  const char* raw = std::getenv(name);
  if (!raw || !*raw) return std::nullopt;
  return std::string(raw);
}

std::optional<long long> get_int(const char* name, long long lo, long long hi) {
  const std::optional<std::string> v = get_string(name);
  if (!v) return std::nullopt;
  const bool digits = std::all_of(v->begin(), v->end(), [](unsigned char c) { return std::isdigit(c) != 0; });
  const bool ok = digits && v->size() <= 18 && std::stoll(*v) >= lo && std::stoll(*v) <= hi;
  if (!ok)
    throw Error(ErrorCode::InvalidArgument, std::string("environment variable ") + name + "='" + *v +
                                                "': must be a decimal integer in [" + std::to_string(lo) + ", " +
                                                std::to_string(hi) + "]");
  return std::stoll(*v);
}

ScopedVar::ScopedVar(const char* name) : name_(name), had_(std::getenv(name) != nullptr), old_(had_ ? std::getenv(name) : "") {}

ScopedVar::~ScopedVar() {
  if (had_) ::setenv(name_.c_str(), old_.c_str(), 1);
  else ::unsetenv(name_.c_str());
}

void ScopedVar::set(const std::string& value) const { ::setenv(name_.c_str(), value.c_str(), 1); }
void ScopedVar::unset() const { ::unsetenv(name_.c_str()); }

}  // namespace svdq::env

// SVDQ_* environment variables, parsed strictly: a malformed value is an error naming the variable, never ignored.
#pragma once
#include <optional>
#include <string>

namespace svdq::env {

// Booleans accept 1/0/true/false/yes/no (any case); unset -> fallback; anything else throws svdq::Error.
bool get_bool(const char* name, bool fallback);
// Unset or empty -> nullopt.
std::optional<std::string> get_string(const char* name);

}  // namespace svdq::env

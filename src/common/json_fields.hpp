// Typed field access for the project's JSON data files (arch tiers, route tables): every failure is an
// svdq::Error(InvalidArgument) "<origin>: <where> ..." naming the field and the rule it breaks.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace svdq::jsonf {

using nlohmann::json;

[[noreturn]] void fail(const std::string& origin, const std::string& what);
const json& member(const json& obj, const char* key, const std::string& origin, const std::string& where);
std::string string_field(const json& obj, const char* key, const std::string& origin, const std::string& where);
int64_t int_field(const json& obj, const char* key, const std::string& origin, const std::string& where, int64_t lo);
double number_field(const json& obj, const char* key, const std::string& origin, const std::string& where, double lo);
std::vector<int> int_list_field(const json& obj, const char* key, const std::string& origin, const std::string& where);

}  // namespace svdq::jsonf

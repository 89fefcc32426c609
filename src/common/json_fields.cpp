#include "common/json_fields.hpp"

#include "svdq/error.hpp"

namespace svdq::jsonf {

void fail(const std::string& origin, const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, origin + ": " + what);
}

const json& member(const json& obj, const char* key, const std::string& origin, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key)) fail(origin, where + " has no field '" + key + "'");
  return obj.at(key);
}

std::string string_field(const json& obj, const char* key, const std::string& origin, const std::string& where) {
  const json& v = member(obj, key, origin, where);
  if (!v.is_string()) fail(origin, where + " field '" + key + "' must be a string");
  return v.get<std::string>();
}

int64_t int_field(const json& obj, const char* key, const std::string& origin, const std::string& where, int64_t lo) {
  const json& v = member(obj, key, origin, where);
  if (!v.is_number_integer() || v.get<int64_t>() < lo)
    fail(origin, where + " field '" + key + "' must be an integer >= " + std::to_string(lo));
  return v.get<int64_t>();
}

double number_field(const json& obj, const char* key, const std::string& origin, const std::string& where, double lo) {
  const json& v = member(obj, key, origin, where);
  if (!v.is_number() || v.get<double>() < lo)
    fail(origin, where + " field '" + key + "' must be a number >= " + std::to_string(lo));
  return v.get<double>();
}

std::vector<int> int_list_field(const json& obj, const char* key, const std::string& origin, const std::string& where) {
  const json& v = member(obj, key, origin, where);
  if (!v.is_array()) fail(origin, where + " field '" + key + "' must be an array of integers");
  std::vector<int> out;
  for (const auto& x : v) {
    if (!x.is_number_integer()) fail(origin, where + " field '" + key + "' must hold integers only");
    out.push_back(x.get<int>());
  }
  return out;
}

}  // namespace svdq::jsonf

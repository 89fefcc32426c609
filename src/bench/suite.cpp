#include "bench/suite.hpp"

namespace svdq::bench {

std::vector<Shape> default_suite() {
  std::vector<Shape> v;
  for (int64_t r : {32, 64, 96, 128})
    for (bool b : {false, true}) v.push_back(make_shape(129, 3072, 3072, r, b));
  for (int64_t r : {32, 128})
    for (bool b : {false, true}) v.push_back(make_shape(129, 3072, 12288, r, b));
  for (int64_t r : {32, 64, 96, 128}) v.push_back(make_shape(6912, 3072, 3072, r, true));
  for (int64_t r : {32, 128}) v.push_back(make_shape(6912, 3072, 12288, r, true));
  const int64_t big_m[] = {4096, 6889, 9216, 16384};
  for (int64_t m : big_m) v.push_back(make_shape(m, 3072, 3072, 32, true));
  for (int64_t m : big_m) v.push_back(make_shape(m, 3072, 12288, 32, true));
  for (int64_t m : big_m) v.push_back(make_shape(m, 12288, 3072, 32, true));
  return v;
}

std::vector<Shape> parse_shape_list(const std::string& text) {
  std::vector<Shape> v;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    if (item.empty())
      throw Error(ErrorCode::InvalidArgument, "shape list '" + text + "': empty entry (expected comma-separated MxNxK[:rR][:bB])");
    v.push_back(parse_shape(item));
    if (comma == std::string::npos) return v;
    start = comma + 1;
  }
}

}  // namespace svdq::bench

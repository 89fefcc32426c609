// Shape lists for `svdq bench` / `svdq verify`: the SPEC §3 default suite (the seed's table shapes) and user lists.
#pragma once
#include <string>
#include <vector>

#include "bench/problem.hpp"

namespace svdq::bench {

// SPEC §3, braces expanded in the order written there (30 shapes).
std::vector<Shape> default_suite();

// Comma-separated shapes, each "MxNxK[:rR][:bB]" (parse_shape); blanks around entries are ignored. Throws
// svdq::Error naming the bad entry; an empty list is an error.
std::vector<Shape> parse_shape_list(const std::string& text);

}  // namespace svdq::bench

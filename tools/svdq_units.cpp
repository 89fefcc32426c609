// Writes every build's rendered unit and the embedded headers under DIR (for nvcc/cuobjdump inspection).
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "sources/embedded_sources.hpp"
#include "registry/registry.hpp"

int main(int argc, char** argv) {
  if (argc != 2 || argv[1][0] == '-') {  // an option is never a directory name here
    std::fprintf(stderr, "usage: svdq_units DIR   (writes every build's rendered unit as DIR/<build id>.cu)\n");
    return 2;
  }
  const std::filesystem::path dir(argv[1]);
  std::filesystem::create_directories(dir);
  for (const auto& b : svdq::registry::all_builds())
    std::ofstream(dir / (b.id + ".cu")) << svdq::registry::render(b);
  return 0;
}

// Writes every build's rendered unit and the embedded headers under DIR (for nvcc/cuobjdump inspection).
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "jit/embedded_sources.hpp"
#include "registry/registry.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: svdq_units DIR\n");
    return 2;
  }
  const std::filesystem::path dir(argv[1]);
  std::filesystem::create_directories(dir);
  for (const auto& b : svdq::registry::all_builds())
    std::ofstream(dir / (b.id + ".cu")) << svdq::registry::render(b);
  return 0;
}

// The device headers under kernels/, embedded at build time (cmake/embed_kernels.cmake writes the table). Below
// every other src/ folder: registry renders and hashes units from them, jit hands them to NVRTC.
#pragma once
#include <vector>

namespace svdq::sources {
struct EmbeddedSource {
  const char* path;  // relative to kernels/, e.g. "common/smxx_nvfp4_codec.cuh"
  const char* text;
};
const std::vector<EmbeddedSource>& embedded_sources();
}  // namespace svdq::sources

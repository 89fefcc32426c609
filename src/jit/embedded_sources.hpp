// The device headers under kernels/, embedded at build time (cmake/embed_kernels.cmake).
#pragma once
#include <vector>

namespace svdq::jit {
struct EmbeddedSource {
  const char* path;  // relative to kernels/, e.g. "common/smxx_nvfp4_codec.cuh"
  const char* text;
};
const std::vector<EmbeddedSource>& embedded_sources();
}  // namespace svdq::jit

// NVRTC compilation of a rendered unit against the embedded device headers.
#pragma once
#include <string>
#include <vector>

namespace svdq::jit {

struct CompileOutput {
  std::vector<char> image;  // CUBIN for a real target (sm_XY[a|f]), PTX text for a virtual one (compute_XY)
  std::string log;
  double seconds = 0.0;
};

// `target` is "sm_90a", "sm_80", "compute_80", ... Throws svdq::Error(Compile) with the NVRTC log on failure.
CompileOutput compile_unit(const std::string& unit_name, const std::string& source, const std::string& target,
                           const std::vector<std::string>& extra_options = {});

// The fixed options every unit is compiled with (part of cache keys).
std::vector<std::string> base_options();

std::string nvrtc_version();           // "13.0"
int nvrtc_version_number();            // 130
const std::vector<int>& nvrtc_supported_archs();  // e.g. {75, 80, 86, ..., 121}

}  // namespace svdq::jit

// Prints one line per shape of the default suite: the SHA-256 of mm_nvfp4_svdquant's output on the suite's random
// problem for that shape (bench::Problem with the shape's own seed). Built from two commits and run on the same GPU,
// equal lines mean bitwise-equal outputs (the release check of SPEC §1; `scripts/device.sh bits` compares against
// the build of another commit carried in .carry/old).
#include <cstdio>
#include <string>
#include <vector>

#include "bench/problem.hpp"
#include "bench/suite.hpp"
#include "common/sha256.hpp"

int main(int argc, char** argv) {
  const uint64_t seed = argc > 1 ? std::stoull(argv[1]) : 1;
  std::string why;
  if (!svdq::gpu_available(&why)) {
    std::fprintf(stderr, "svdq_bits: no CUDA device: %s\n", why.c_str());
    return 2;
  }
  try {
    for (const auto& s : svdq::bench::default_suite()) {
      svdq::bench::Problem p(s, svdq::bench::mix_seed(seed, static_cast<uint64_t>(s.m * 1000003 + s.n * 101 + s.k + s.rank * 7 + s.bias)));
      p.poison_output();
      p.run();
      const std::vector<uint16_t> out = p.download_output();
      svdq::Sha256 h;
      h.update(std::string(reinterpret_cast<const char*>(out.data()), out.size() * 2));
      std::printf("%s %s\n", s.str().c_str(), h.hex().c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "svdq_bits: %s\n", e.what());
    return 3;
  }
  return 0;
}

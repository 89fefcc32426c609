// svdq: device facts, a correctness check against the CPU reference, and the SPEC §3 benchmark.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <iostream>
#include <random>

#include "commands.hpp"
#include "svdq/svdq.hpp"

namespace svdq::cli {

int guarded(const char* name, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::cerr << "svdq " << name << ": " << e.what() << "\n";
    if (e.code() == ErrorCode::NoDevice) return kNoDevice;
    return e.code() == ErrorCode::InvalidArgument ? kUsage : kError;
  } catch (const std::bad_alloc&) {
    std::cerr << "svdq " << name << ": out of host memory\n";
    return kError;
  } catch (const std::exception& e) {
    std::cerr << "svdq " << name << ": " << e.what() << "\n";
    return kError;
  }
}

uint64_t shape_seed(uint64_t seed, const bench::Shape& shape) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a of the canonical shape text
  for (char c : shape.str()) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return bench::mix_seed(seed, h);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string session_spread(const std::vector<double>& sm) {
  if (sm.size() < 2) return "";
  const auto [lo, hi] = std::minmax_element(sm.begin(), sm.end());
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%.2f-%.2f]", *lo, *hi);
  return buf;
}

uint64_t fresh_seed() {
  std::random_device rd;
  const uint64_t t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  // Folded to 31 bits so it is easy to read and retype.
  return bench::mix_seed((uint64_t(rd()) << 32) ^ rd(), t) & 0x7FFFFFFFull;
}

namespace {
std::string quoted_command_line(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.empty() || a.find_first_of(" \t\n'\"\\$`*?;&|<>(){}[]!#~") != std::string::npos) {
      std::string q = "'";
      for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      a = q + "'";
    }
    out += (i ? " " : "") + a;
  }
  return out;
}
}  // namespace

}  // namespace svdq::cli

int main(int argc, char** argv) {
  using namespace svdq::cli;
  CLI::App app{"svdq: NVFP4 SVDQuant linear layer (device facts, correctness check, benchmark, tuning, AOT packages)", "svdq"};
  app.set_version_flag("--version", [] { return "svdq " + svdq::version_string(); });
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 success; 1 a check failed (verify mismatch, census/aot/doctor problem); 2 no usable CUDA device; 3 runtime error; 64 bad command "
      "line.");
  int rc = kOk;
  try {
    add_info(app, &rc);
    add_verify(app, &rc);
    add_bench(app, &rc, quoted_command_line(argc, argv));
    add_aot(app, &rc);
    add_census(app, &rc);
    add_doctor(app, &rc);
    add_tune(app, &rc, quoted_command_line(argc, argv));
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
    std::cerr << "svdq: " << e.what() << " (see svdq --help)\n";
    return kUsage;
  } catch (const std::exception& e) {
    std::cerr << "svdq: " << e.what() << "\n";
    return kError;
  }
  std::fflush(stdout);
  return rc;
}

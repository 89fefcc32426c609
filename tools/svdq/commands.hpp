// The `svdq` subcommands. Each registers itself on the app; its result lands in *exit_code when it runs.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "bench/problem.hpp"
#include "svdq/svdq.hpp"

namespace svdq::cli {

// Exit codes, the same for every subcommand (listed in `svdq --help`).
enum Exit : int { kOk = 0, kCheckFailed = 1, kNoDevice = 2, kError = 3, kUsage = 64 };

void add_info(CLI::App& app, int* exit_code);
void add_verify(CLI::App& app, int* exit_code);
void add_bench(CLI::App& app, int* exit_code, const std::string& command_line);
void add_aot(CLI::App& app, int* exit_code);
void add_census(CLI::App& app, int* exit_code);
void add_doctor(CLI::App& app, int* exit_code);
void add_tune(CLI::App& app, int* exit_code, const std::string& command_line);

// Runs a subcommand body and turns any exception into one line on stderr, prefixed "svdq <name>: ", and an exit code.
int guarded(const char* name, const std::function<int()>& body);

// A shape's own seed: depends on the user seed and the shape only, so `--shapes X --seed S` alone reproduces one
// row of a larger run.
uint64_t shape_seed(uint64_t seed, const bench::Shape& shape);

// The current UTC time as 2026-11-29T21:19:00Z.
std::string utc_now();

// The comment lines every bench CSV starts with: GPU, date, version and command; the timing method; then each of
// `extra` (where the shapes came from, what a column is) as a line of its own.
void write_csv_header(std::ostream& f, const DeviceInfo& dev, const std::string& method, const std::string& command_line,
                      const std::vector<std::string>& extra = {});

// "[lo-hi]": the smallest and largest of the sessions' medians ("" for fewer than two sessions).
std::string session_spread(const std::vector<double>& session_medians);

// A seed for a run that was given none (std::random_device and the clock), printed so the run can be repeated.
uint64_t fresh_seed();

}  // namespace svdq::cli

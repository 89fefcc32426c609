// Shared by the libFuzzer harnesses: a failed property check is a finding, reported as an abort with a message
// (libFuzzer saves the input as crash-<sha1>).
#pragma once
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, ...)                                                             \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n  ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                  \
      std::fprintf(stderr, "\n");                                                         \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

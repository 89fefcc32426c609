// svdq's one error mechanism: every failure throws svdq::Error. Its message names the function, the argument and
// the rule that was broken ("mm_nvfp4_svdquant: argument 'k' = 48: must be a positive multiple of 32"); code() groups it.
#pragma once
#include <stdexcept>
#include <string>

namespace svdq {

enum class ErrorCode {
  InvalidArgument,  // a caller's value breaks a documented rule; nothing was launched or written
  Overflow,         // checked 64-bit shape/stride/size arithmetic overflowed or divided by zero
  NoDevice,         // no usable CUDA device / driver
  Unsupported,      // the device or toolkit cannot run what was asked
  Compile,          // NVRTC failed to compile a kernel unit
  Cuda,             // a CUDA runtime/driver call failed
  Io,               // reading or writing a file failed
  NoKernelImage,    // no image of a module runs on this device and JIT compilation is disabled
};

const char* to_string(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace svdq

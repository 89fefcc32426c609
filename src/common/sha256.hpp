// SHA-256 (FIPS 180-4), for content-keyed unit names and cache keys.
#pragma once
#include <cstdint>
#include <string>

namespace svdq {

class Sha256 {
 public:
  Sha256();
  Sha256& update(const void* data, size_t len);
  Sha256& update(const std::string& s) { return update(s.data(), s.size()); }
  std::string hex();  // finalizes; 64 lowercase hex digits

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
  bool done_ = false;
  std::string hex_;
};

inline std::string sha256_hex(const std::string& s) { return Sha256().update(s).hex(); }

}  // namespace svdq

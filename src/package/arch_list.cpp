#include "package/arch_list.hpp"

#include <algorithm>
#include <cctype>

#include "svdq/error.hpp"

namespace svdq::package {

namespace {

constexpr const char* kTokenRule = "must match ^\\d+\\.\\d+[af]?$ as a whole token (e.g. 8.0, 9.0a, 12.0f)";

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_separator(char c) { return c == ',' || c == ';' || std::isspace(static_cast<unsigned char>(c)); }

[[noreturn]] void bad_token(const std::string& token, const std::string& why) {
  throw Error(ErrorCode::InvalidArgument, "arch list: token '" + token + "' " + why);
}

// Reads the digits at text[*pos...]; returns how many there were.
size_t read_digits(const std::string& text, size_t* pos) {
  const size_t start = *pos;
  while (*pos < text.size() && is_digit(text[*pos])) ++*pos;
  return *pos - start;
}

std::string join_ints(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

std::string cc_str(int cc) { return std::to_string(cc / 10) + "." + std::to_string(cc % 10); }

}  // namespace

std::string Arch::str() const {
  std::string s = std::to_string(major) + "." + std::to_string(minor);
  if (suffix) s += suffix;
  return s;
}

std::string Arch::sm() const { return "sm_" + std::to_string(cc()) + (suffix ? std::string(1, suffix) : ""); }

std::string Arch::compute() const {
  return "compute_" + std::to_string(cc()) + (suffix ? std::string(1, suffix) : "");
}

bool Arch::operator<(const Arch& o) const {
  if (cc() != o.cc()) return cc() < o.cc();
  auto rank = [](char s) { return s == 0 ? 0 : (s == 'a' ? 1 : 2); };
  return rank(suffix) < rank(o.suffix);
}

const char* to_string(ImageKind kind) { return kind == ImageKind::Cubin ? "cubin" : "ptx"; }

Arch parse_arch(const std::string& token) {
  // Hand-written rather than std::regex so each failure says which part is wrong.
  size_t pos = 0;
  const size_t major_digits = read_digits(token, &pos);
  if (major_digits == 0) bad_token(token, std::string(kTokenRule) + "; it does not start with a major version digit");
  if (pos == token.size() || token[pos] != '.')
    bad_token(token, std::string(kTokenRule) + "; expected '.' and a minor version after the major");
  const size_t major_end = pos++;
  const size_t minor_digits = read_digits(token, &pos);
  if (minor_digits == 0) bad_token(token, std::string(kTokenRule) + "; no minor version digit after '.'");
  char suffix = 0;
  if (pos < token.size() && (token[pos] == 'a' || token[pos] == 'f')) suffix = token[pos++];
  if (pos != token.size()) {
    const char c = token[pos];
    if (std::isalpha(static_cast<unsigned char>(c)) && suffix == 0)
      bad_token(token, std::string(kTokenRule) + "; suffix '" + std::string(1, c) + "' is unknown (only 'a' and 'f')");
    bad_token(token, std::string(kTokenRule) + "; unexpected '" + token.substr(pos) + "' after the arch");
  }
  // One spelling per target: "08.0" or "9.00" would otherwise dodge the duplicate check and the CC arithmetic.
  if (major_digits > 1 && token[0] == '0') bad_token(token, "has a leading zero in its major version");
  if (major_digits > 2) bad_token(token, "has a major version above 99");
  if (minor_digits != 1)
    bad_token(token, "has a minor version of more than one digit (compute capability minors are 0-9)");
  Arch a;
  a.major = std::stoi(token.substr(0, major_end));
  a.minor = token[major_end + 1] - '0';
  a.suffix = suffix;
  if (a.major == 0) bad_token(token, "has major version 0");
  return a;
}

std::vector<Arch> parse_arch_list(const std::string& text) {
  std::vector<Arch> out;
  // A ',' or ';' must stand between two tokens: ",8.0", "8.0,,9.0" and "8.0;" hide a missing entry.
  bool after_punct = false;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (c == ',' || c == ';') {
      if (out.empty() || after_punct)
        throw Error(ErrorCode::InvalidArgument, "arch list '" + text + "': empty entry before '" + std::string(1, c) +
                                                    "' at position " + std::to_string(i) +
                                                    " (entries are separated by spaces, ',' or ';')");
      after_punct = true;
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && !is_separator(text[end])) ++end;
    const std::string token = text.substr(i, end - i);
    const Arch a = parse_arch(token);
    // parse_arch admits one spelling per target, so equal Archs are equal tokens.
    if (std::find(out.begin(), out.end(), a) != out.end())
      throw Error(ErrorCode::InvalidArgument,
                  "arch list '" + text + "': arch '" + token + "' is listed twice; each target must appear once");
    out.push_back(a);
    after_punct = false;
    i = end;
  }
  if (after_punct)
    throw Error(ErrorCode::InvalidArgument,
                "arch list '" + text + "': ends with a separator; remove it or add the missing arch");
  if (out.empty())
    throw Error(ErrorCode::InvalidArgument,
                "arch list '" + text + "' is empty: name at least one arch, e.g. \"8.0 9.0a\"");
  return out;
}

std::string format_arch_list(const std::vector<Arch>& archs) {
  std::string s;
  for (const auto& a : archs) s += (s.empty() ? "" : " ") + a.str();
  return s;
}

Arch parse_target_name(const std::string& name, ImageKind* kind) {
  ImageKind k;
  size_t pos;
  if (name.rfind("sm_", 0) == 0) {
    k = ImageKind::Cubin;
    pos = 3;
  } else if (name.rfind("compute_", 0) == 0) {
    k = ImageKind::Ptx;
    pos = 8;
  } else {
    throw Error(ErrorCode::InvalidArgument,
                "target name '" + name + "': must be sm_<CC>[a|f] or compute_<CC>[a|f] (e.g. sm_90a, compute_80)");
  }
  const size_t start = pos;
  const size_t digits = read_digits(name, &pos);
  char suffix = 0;
  if (pos < name.size() && (name[pos] == 'a' || name[pos] == 'f')) suffix = name[pos++];
  if (digits < 2 || digits > 3 || pos != name.size() || name[start] == '0')
    throw Error(ErrorCode::InvalidArgument, "target name '" + name +
                                                "': must be sm_<CC>[a|f] or compute_<CC>[a|f] with a 2- or 3-digit "
                                                "compute capability (e.g. sm_90a, sm_100f, compute_80)");
  const int cc = std::stoi(name.substr(start, digits));
  if (kind) *kind = k;
  Arch a;
  a.major = cc / 10;
  a.minor = cc % 10;
  a.suffix = suffix;
  return a;
}

int parse_toolkit_version(const std::string& version) {
  size_t pos = 0;
  const size_t major_digits = read_digits(version, &pos);
  bool ok = major_digits >= 1 && major_digits <= 2 && pos < version.size() && version[pos] == '.';
  size_t minor_digits = 0;
  if (ok) {
    ++pos;
    minor_digits = read_digits(version, &pos);
    ok = minor_digits == 1 && pos == version.size();
  }
  if (!ok)
    throw Error(ErrorCode::InvalidArgument,
                "toolkit version '" + version + "': must be <major>.<minor> with a one-digit minor, e.g. 13.0");
  return std::stoi(version.substr(0, major_digits)) * 10 + (version[major_digits + 1] - '0');
}

std::vector<int> family_members(int family_cc) {
  switch (family_cc) {
    case 100: return {100, 103, 107};
    case 101: return {101};  // CUDA 12.9's Thor family; the CC is 11.0 from CUDA 13.0 on
    case 103: return {103, 107};
    case 107: return {107};
    case 110: return {110};
    case 120: return {120, 121};
    case 121: return {121};
    default: return {family_cc};  // unknown family: promise no more than the CC it was built for
  }
}

bool runs_on(const Arch& target, int device_cc) {
  switch (target.suffix) {
    case 'a': return device_cc == target.cc();
    case 'f': {
      const auto m = family_members(target.cc());
      return std::find(m.begin(), m.end(), device_cc) != m.end();
    }
    default: return device_cc / 10 == target.major && device_cc % 10 >= target.minor;
  }
}

bool ptx_runs_on(const Arch& target, int device_cc) {
  if (target.suffix == 0) return device_cc >= target.cc();
  return runs_on(target, device_cc);  // 'a'/'f' PTX uses features only that CC / that family has
}

bool image_runs_on(ImageKind kind, const Arch& target, int device_cc) {
  return kind == ImageKind::Cubin ? runs_on(target, device_cc) : ptx_runs_on(target, device_cc);
}

std::string describe_runs_on(ImageKind kind, const Arch& target) {
  if (target.suffix == 'a') return "runs on " + cc_str(target.cc()) + " only";
  if (target.suffix == 'f') {
    std::string s;
    for (int cc : family_members(target.cc())) s += (s.empty() ? "" : ", ") + cc_str(cc);
    return "runs on " + s;
  }
  if (kind == ImageKind::Ptx) return "JIT on " + cc_str(target.cc()) + " and later";
  return "runs on " + std::to_string(target.major) + ".x with x >= " + std::to_string(target.minor);
}

void check_toolkit_can_build(const std::vector<Arch>& archs, const std::vector<int>& nvrtc_supported,
                             const std::string& toolkit_version) {
  const int tk = parse_toolkit_version(toolkit_version);
  std::string problems;
  for (const auto& a : archs) {
    std::string why;
    if (std::find(nvrtc_supported.begin(), nvrtc_supported.end(), a.cc()) == nvrtc_supported.end()) {
      why = "NVRTC " + toolkit_version + " has no " + std::to_string(a.cc()) + " (nvrtcGetSupportedArchs: " +
            join_ints(nvrtc_supported) + "); use a toolkit that lists it";
    } else if (a.suffix == 'a' && a.cc() < 90) {
      why = "arch-specific 'a' targets exist only for 9.0 and later";
    } else if (a.suffix == 'f' && tk < 129) {
      why = "family 'f' targets need CUDA 12.9 or later";
    } else if (a.suffix == 'f' && a.cc() < 100) {
      // Measured: NVRTC 12.9/13.0/13.4 reject sm_90f, sm_89f; they accept every supported CC >= 100 with 'f'.
      why = "family 'f' targets exist only for 10.0 and later (e.g. 10.0f, 10.3f, 11.0f, 12.0f)";
    }
    if (!why.empty()) problems += "\n  '" + a.str() + "' (" + a.sm() + "): " + why;
  }
  if (!problems.empty())
    throw Error(ErrorCode::Unsupported,
                "CUDA " + toolkit_version + " cannot build these archs of the list '" + format_arch_list(archs) +
                    "' (an arch is never dropped silently):" + problems);
}

}  // namespace svdq::package

#include "generator/spec/toml_text.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace lathe::spec {

std::string toml_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  if (v == std::trunc(v) && std::fabs(v) < 1e15) {
    // Exact in fixed notation: every integer below 2^53 prints as itself.
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
  }
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip
  std::string s(buf, ec == std::errc{} ? end : buf);
  const size_t e = s.find('e');
  if (e != std::string::npos) {
    // 1e-05 → 1e-5: the same number, as the hand-written specs spell it.
    size_t digits = e + 1;
    if (digits < s.size() && (s[digits] == '-' || s[digits] == '+')) ++digits;
    while (digits + 1 < s.size() && s[digits] == '0') s.erase(digits, 1);
  } else if (s.find('.') == std::string::npos) {
    s += ".0";
  }
  return s;
}

std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace lathe::spec

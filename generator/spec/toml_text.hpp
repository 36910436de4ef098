// TOML text of single values, for the spec writers (lathe import's TomlDoc,
// lathe design): what parses back to exactly the value given.
#pragma once

#include <string>
#include <string_view>

namespace lathe::spec {

// A float as TOML text that parses back to exactly `v`: integral values get
// ".0" (10000.0, 500000.0), others the shortest round-trip form with the
// exponent's leading zeros dropped (1e-5, 0.0625, 1.5e+20).
// NaN and infinities print as nan / inf / -inf.
std::string toml_float(double v);
// A basic string, quoted, with ", \ and control characters escaped.
std::string toml_string(std::string_view s);

}  // namespace lathe::spec

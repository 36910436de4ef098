// `lathe check`: compiles a generated model header in process with Clang's
// libTooling (-fsyntax-only, C++20) so that the contract's static_asserts —
// in the header and, through the instantiated forward schedule, in the typed
// API (core/typed.hpp) — run without a build. The header's `#line`
// directives make the diagnostics point at the spec.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lathe::clang {

struct CheckDiagnostic {
  enum class Severity { Note, Warning, Error };
  Severity severity = Severity::Error;
  std::string file;  // after #line: the spec for the constants and contracts
  unsigned line = 0;  // 0: no location (a driver message)
  unsigned column = 0;
  std::string message;

  // "file:line:col: error: message" (or "error: message" without a location).
  std::string format() const;
};

struct CheckOptions {
  // The name the header has in the translation unit (`#include "<name>"`); it
  // is a file in memory only. Give emit_model_header the same name so that its
  // `#line` resets agree.
  std::string header_name = "model.hpp";
  // The model's namespace under lathe::models (emit::model_namespace); when
  // set, forward<typed::Recorder> is instantiated explicitly.
  std::string model_namespace;
  // -I directories: the repository root (for "runtime/model/*.hpp").
  std::vector<std::string> include_dirs;
  // C++ appended to the translation unit after the header (tests, debugging).
  std::string extra_code;
  // More headers in memory beside it, name and text: a [vision] spec's
  // tower.hpp, which its model header includes.
  std::vector<std::pair<std::string, std::string>> headers;
};

struct CheckResult {
  bool ok = false;  // compiled without errors
  std::vector<CheckDiagnostic> diagnostics;  // in the order Clang gave them
  int errors() const;
  std::string format() const;  // one formatted diagnostic a line
};

// Compiles `header_text` (plus the instantiation tail and extra_code) with
// -fsyntax-only -std=c++20 against Clang 14's resource headers and the
// system's libstdc++.
CheckResult check_generated(const std::string& header_text, const CheckOptions& options);

}  // namespace lathe::clang

// Errors at a spec position: `models/x.toml:12:5: message`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/loc.hpp"

namespace lathe::spec {


struct Diagnostic {
  Loc loc;
  std::string message;
};

// Every error of one file, collected so that all are reported at once.
class Diagnostics {
 public:
  explicit Diagnostics(std::string file) : file_(std::move(file)) {}

  void error(Loc loc, std::string message) { items_.push_back({loc, std::move(message)}); }
  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  const std::string& file() const { return file_; }
  const std::vector<Diagnostic>& items() const { return items_; }

  // One line per error, ordered by position: "file:line:col: message".
  std::string format() const;

 private:
  std::string file_;
  std::vector<Diagnostic> items_;
};

std::string format_diagnostic(const std::string& file, const Diagnostic& d);

// The closest of `candidates` to `word` when it is close enough to be a typo.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace lathe::spec

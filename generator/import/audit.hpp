// `lathe audit CHECKPOINT`: one artifact's whole contract checked, config,
// tokenizer and tensors against each other (issue 28). A Hugging Face
// directory (config.json, safetensors, tokenizer.json or tokenizer.model,
// tokenizer_config.json, generation_config.json) or a GGUF file (its
// metadata, tensors and vocabulary) is imported as a spec (import.hpp), and
// what the spec implies is checked against what the files hold: every
// tensor with its shape, the attention's head arithmetic, norms, MLP,
// experts, latent attention, state-space parameters, the tie of the head,
// the tokenizer's size against the embedding, the special ids, the chat
// template, RoPE scaling and the context. docs/audit.md lists every check.
//
// Nothing here throws for a bad checkpoint: what cannot be read is an error
// check naming the file, and the checks that need it are left out.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace lathe::importer {

enum class AuditStatus { Ok, Warning, Error };
const char* name(AuditStatus);  // "ok", "warning", "error"

// One check: a stable id ("attention", "tie", "special_tokens", …), its
// verdict and one line that says what was found, with the numbers and the
// file, key or tensor at fault.
struct AuditCheck {
  std::string id;
  AuditStatus status = AuditStatus::Ok;
  std::string message;
};

struct AuditResult {
  std::string path;
  std::string format;  // "Hugging Face directory", "GGUF file", or "" when the path could not be read
  std::vector<AuditCheck> checks;  // in the order docs/audit.md lists them; those that do not apply left out

  const AuditCheck* find(const std::string& id) const;
  size_t count(AuditStatus status) const;
};

// Audits `path`: a Hugging Face model directory (or its config.json), a
// .gguf file, or a directory holding one .gguf file and no config.json.
AuditResult audit_checkpoint(const std::string& path);

// "ok       attention: …" a line per check, then a summary line.
std::string format_audit(const AuditResult& result);
// {"path", "format", "checks": [{"id", "status", "message"}], "ok", "warnings", "errors"}.
nlohmann::ordered_json audit_json(const AuditResult& result);

}  // namespace lathe::importer

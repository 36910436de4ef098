// libFuzzer target for the safetensors reader: any bytes in, as a
// .safetensors file, must either open or throw lathe::Error. An opened file
// is walked as a checkpoint is: every tensor found by name and its bytes
// read, the metadata, an audit against a small manifest and the
// checkpoint's name matching and shape. lathe::Error from any of those is an
// answer; a crash, a sanitizer report, a hang, any other exception or a
// tensor whose bytes are not its size is a finding.
//
// scripts/fuzz builds and runs it with the others; `scripts/fuzz -t 300 safetensors`
// fuzzes it alone for five minutes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz.hpp"
#include "runtime/error.hpp"
#include "runtime/weights/checkpoint.hpp"
#include "runtime/weights/safetensors.hpp"

using namespace lathe;
using namespace lathe::weights;

void lathe::fuzz::safetensors(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, "model.safetensors");
  const std::vector<ManifestEntry> manifest = {
      {Role::Embed, false, -1, -1, "model.embed_tokens.weight", 2, {8, 4}, DType::F16},
      {Role::Q, false, 0, -1, "model.layers.0.self_attn.q_proj.weight", 2, {4, 4}, DType::F32},
      {Role::FinalNorm, false, -1, -1, "model.norm.weight", 1, {4, 1}, DType::BF16},
  };
  try {
    const SafetensorsFile file(path);
    for (const TensorInfo& info : file.tensors()) {
      if (file.find(info.name) == nullptr) finding("a listed tensor is not found by its name");
      const auto bytes = file.data(info);
      if (bytes.size() != info.bytes) finding("a tensor's bytes are not its size");
      (void)shape_string(info.shape);
    }
    for (const auto& [key, value] : file.metadata()) (void)(key.size() + value.size());
    (void)audit(file, manifest, std::vector<std::string>{"h.{layer}.attn.bias"});
  } catch (const Error&) {
  }
  try {
    Checkpoint checkpoint(path);
    (void)checkpoint.match_names(manifest);
    (void)checkpoint.shape();
    (void)checkpoint.audit(manifest);
    (void)checkpoint.total_bytes();
  } catch (const Error&) {
  }
}

LATHE_FUZZ_TARGET(lathe::fuzz::safetensors)

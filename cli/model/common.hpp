// What the model executable's commands share (cli/model/): the device and
// the split of the layers over devices and MPI ranks (--device, --split),
// a checkpoint into a session, the kernels' warm-up, and token ids, texts
// and tokenizers from the command line. common.cpp defines them, ranks.cpp
// the link between the ranks of a split over processes.
#pragma once

#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/contract.hpp"
#include "runtime/generate/images.hpp"
#include "runtime/generate/speculate.hpp"
#include "runtime/image/preprocess.hpp"
#include "runtime/model/session.hpp"
#include "runtime/model/stage_link.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"
#include "runtime/vk/device.hpp"
#include "runtime/weights/checkpoint.hpp"

namespace lathe::cli {

// `text` read whole as a number (std::stoll or std::stod), or nullopt.
template <class T>
std::optional<T> read_number(const std::string& text) {
  size_t used = 0;
  T v{};
  try {
    if constexpr (std::is_integral_v<T>) v = std::stoll(text, &used);
    else v = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used == 0 || used != text.size()) return std::nullopt;
  return v;
}

// A model split over processes: `mpirun -np N <model> <command> …` runs the
// command on rank 0 and one pipeline stage of the layers on every rank
// (--split layers:…; as even as they divide without it), each rank on its
// own device and its own copy of the checkpoint, the hidden states passed
// as MPI messages (Open MPI; a build without it refuses to run under
// mpirun). Null: one process.
extern lathe::StageLink* g_link;

// --split (every command's, given before or after it): how the layers go
// over the devices --device names: "layers:16,16" as given, "memory" the
// contiguous runs whose largest share of what a device can take now
// (vk::device_memory: its budget less its usage where it reports them,
// else its heap) is least, each layer its weights and caches
// (core/balance.hpp, as `lathe report --split memory` plans it), empty: as
// evenly as they divide (the first stages one more).
extern std::string g_split;

// --mmproj (every command's, given before or after it): a GGUF text model's
// vision tower, llama.cpp's mmproj file. The tower's weights come from it,
// and the image processor's settings from its clip.vision.* keys (the
// family's Hugging Face processor at its image_size, mean and std), in
// place of the checkpoint's and the preprocessor_config.json beside it.
extern std::string g_mmproj;

// The image processor of an mmproj file `path`: the Hugging Face processor
// of its projector type's family (CLIPImageProcessor for mlp,
// Gemma3ImageProcessor for gemma3, PixtralImageProcessor for pixtral) at
// its clip.vision.image_size, patch_size, image_mean and image_std. Throws
// Error naming the file and key for another projector type or a missing key.
lathe::image::Preprocess mmproj_preprocess(const std::string& path);

// Under mpirun with several ranks (Open MPI's OMPI_COMM_WORLD_SIZE), the
// link between them; null for one process.
std::unique_ptr<lathe::StageLink> open_link(const char* program);

// Ends every rank with `code` (under MPI: MPI_Abort), so that none waits on
// one that failed.
[[noreturn]] void abort_ranks(lathe::StageLink& link, int code);

// A rank above 0 of a split over processes: its stage of the command's
// model, from the command line's --weights, --device and --no-check (every
// rank is given the same command).
int run_stage_rank(int argc, char** argv, lathe::StageLink& link);

// --device: an index or part of a name; empty: LATHE_DEVICE, else the best;
// several, comma-separated ("0,1"), split the model's layers over them (under
// MPI: each rank's).
lathe::vk::ContextOptions device_options(const std::string& device);

// A command's session options over the context's devices (--split).
lathe::SessionOptions split_over(lathe::SessionOptions options, lathe::vk::Context& vk);

// Before anything is timed. On a first run the kernels compile (llvmpipe
// JITs each at its first dispatch): that is said, not reported as a speed.
// `rows`: the prompt's tokens (the kernels of its chunk's layout compile).
// The compile says what it does: on a terminal a line that is rewritten as
// each pass's kernels compile ("compiling kernels, once …: decode (2/3),
// 12.0 s"), elsewhere each pass named as it begins. A later run still builds
// its pipelines (lavapipe translates every kernel at each start, seconds for
// a K-quant model): past a second, a terminal shows that too, and the line
// is wiped when done.
void warm_up(lathe::Session& session, int64_t rows);

// Random values for one manifest tensor, deterministic in `state`: uniform
// in [-scale, scale), norm scales around 1, a state-space layer's A, dt
// bias and D in a trained model's ranges (lathe::ssm_parameter).
std::vector<float> random_values(const lathe::ManifestEntry& e, uint64_t& state, float scale);

// The checkpoint at `weights` opened and audited against the build's
// manifest before the device starts (a file that does not fit is refused in
// milliseconds, not after the device's start); null for random weights.
std::unique_ptr<lathe::weights::Checkpoint> checked(const std::string& weights);

// Loads `checkpoint` (checked()), or random weights when it is null;
// `check`: refuse a NaN or an infinity among them (--no-check turns it off).
void load_weights(lathe::Session& session, const lathe::weights::Checkpoint* checkpoint, bool check);

// A vision model's preprocessor_config.json, beside the checkpoint
// `weights` (a directory, or a file in it). Throws Error naming `option`
// when there is no checkpoint or no such file.
std::filesystem::path preprocessor_config(const std::string& weights, const std::string& option);

// --image, chat's /image and serve: the tower's build (vision_info()) in a
// session of its own on `device`, its weights from the checkpoint `weights`,
// the image processor's settings from the preprocessor_config.json beside
// it (under --mmproj, both from the mmproj file); each file's rows for the decoder (text::encode_image). Throws Error
// naming `option` (and the file) for a model without a [vision] splice, no
// checkpoint, a missing config or a bad image.
class ImageEncoder {
 public:
  ImageEncoder(const std::string& weights, bool check, lathe::vk::Device& device,
               const std::string& option = "--image");
  ~ImageEncoder();
  lathe::text::ImageFeatures encode(const std::string& file);
  // The server encodes on its engine thread: the tower's session and the
  // image processor's settings.
  lathe::Session& session();
  const lathe::image::Preprocess& preprocess() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
std::vector<lathe::text::ImageFeatures> image_features(const std::string& weights, const std::vector<std::string>& images,
                                               bool check, lathe::vk::Device& device);

// A build's draft (draft_info()): a session of its own on `device` with
// `sequences` sequences of `context` positions, its weights from
// `weights` (random without), its tokenizer (where one is beside them)
// spelling every token as the model's `tokenizer` (Error naming the first
// that differs), proposing through `draft` (stopping below `min_p`).
struct DraftSession {
  DraftSession(const lathe::ModelInfo& m, const std::string& weights, float min_p, bool check,
               const lathe::text::Tokenizer& tokenizer, lathe::vk::Device& device, int64_t context, int64_t sequences);
  std::unique_ptr<lathe::weights::Checkpoint> checkpoint;
  lathe::Session session;
  lathe::text::SessionDraft model;
  lathe::text::Draft draft;
};

// "weights 3.29 MiB, KV cache 1.50 MiB": what the session holds on the device.
std::string memory_text(const lathe::Session& session);

// Comma- or space-separated ids, optionally in brackets: "1,2,3", "1 2 3",
// or tokenize --ids's "[1, 2, 3]".
std::vector<int32_t> parse_tokens(const std::string& text, const std::string& option = "--tokens");

// The tokenizer of --tokenizer, else the one beside the weights: a GGUF
// file's own vocabulary, or tokenizer.json / tokenizer.model in the
// checkpoint's directory.
lathe::text::Tokenizer load_tokenizer(const std::string& tokenizer, const std::string& weights,
                                      const std::string& needer = "--prompt");

// Whether load_tokenizer finds a tokenizer beside the weights.
bool has_tokenizer(const std::string& weights);

// The whole of the file at `path`, as bytes; `option` names it in errors.
std::string read_text_file(const std::string& path, const std::string& option);

}  // namespace lathe::cli

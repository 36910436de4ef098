// What the model executable's commands share (common.hpp): the device
// options and the split of the layers over devices or ranks, a checkpoint
// or random weights into a session, the kernels' warm-up, token ids,
// tokenizers and text files from the command line.
#include "cli/model/common.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/balance.hpp"
#include "core/plan.hpp"
#include "runtime/error.hpp"
#include "runtime/generate/images.hpp"
#include "runtime/image/image.hpp"
#include "runtime/image/preprocess.hpp"
#include "runtime/model/model_info.hpp"
#include "runtime/model/session.hpp"
#include "runtime/vk/device_info.hpp"
#include "runtime/weights/gguf.hpp"

namespace lathe::cli {

lathe::StageLink* g_link = nullptr;
std::string g_split;
std::string g_mmproj;

namespace {

// One entry of a --device list: a rank's under MPI when it lists one a rank.
std::string rank_device(const std::string& device, int rank, int ranks) {
  const std::vector<std::string> entries = lathe::vk::device_list(device);
  if (entries.size() <= 1) return device;
  if (entries.size() != static_cast<size_t>(ranks))
    throw lathe::Error(lathe::ErrorKind::InvalidArgument, "--device " + device + " lists " + std::to_string(entries.size()) +
                                                               " devices for " + std::to_string(ranks) +
                                                               " ranks: one, or one a rank");
  return entries[static_cast<size_t>(rank)];
}

// The layers of each pipeline stage (SessionOptions::stages) as `split`
// (--split, g_split) gives them, over `devices` or, under MPI, the ranks;
// empty: one stage.
std::vector<int64_t> stage_layers(const std::string& split, const std::vector<lathe::vk::Device*>& devices,
                                  const lathe::SessionOptions& options) {
  const int64_t layers = static_cast<int64_t>(lathe::model_info().plan.carried.size());
  const size_t n = g_link ? static_cast<size_t>(g_link->ranks()) : devices.size();
  if (g_link && split == "memory")
    throw lathe::Error(lathe::ErrorKind::InvalidArgument, "--split memory divides a process's devices; over MPI ranks give "
                                                          "--split layers:N,N,…");
  if (n == 1) {
    if (!split.empty()) throw lathe::Error(lathe::ErrorKind::InvalidArgument, "--split " + split + " needs several --device entries (\"0,1\")");
    return {};
  }
  std::optional<std::vector<int64_t>> counts;  // (empty --split: as even as they divide)
  try {
    if (!split.empty()) counts = lathe::plan::parse_split(split);  // lathe report --split's syntax
  } catch (const std::invalid_argument& e) {
    throw lathe::Error(lathe::ErrorKind::InvalidArgument, e.what());
  }
  if (counts) {
    if (counts->size() != n)
      throw lathe::Error(lathe::ErrorKind::InvalidArgument, "--split " + split + " gives " + std::to_string(counts->size()) +
                                                                " stages for the " + std::to_string(n) + " devices of --device");
    return *counts;
  }
  if (split == "memory") {
    std::vector<int64_t> capacity;
    for (const lathe::vk::Device* d : devices) {
      const lathe::vk::DeviceMemory m = lathe::vk::device_memory(d->info());
      capacity.push_back(static_cast<int64_t>(m.available > 0 ? m.available : m.bytes));
    }
    const lathe::Session::SplitNeed need = lathe::Session::split_need(lathe::model_info(), options);
    const auto balanced = lathe::balance::by_memory(need.layers, capacity, need.first, need.last);
    if (!balanced)
      throw lathe::Error(lathe::ErrorKind::InvalidArgument,
                         "--split memory: " + std::to_string(n) + " devices for " + std::to_string(layers) +
                             " layers, or a device that reports no memory (give --split layers:N,N,…)");
    return *balanced;
  }
  // As evenly as they divide, the first stages one more.
  std::vector<int64_t> stages;
  for (size_t i = 0; i < n; ++i)
    stages.push_back(layers / static_cast<int64_t>(n) + (static_cast<int64_t>(i) < layers % static_cast<int64_t>(n) ? 1 : 0));
  return stages;
}

}  // namespace

lathe::vk::ContextOptions device_options(const std::string& device) {
  lathe::vk::ContextOptions options;
  options.device = g_link ? rank_device(device, g_link->rank(), g_link->ranks()) : device;
  return options;
}

lathe::SessionOptions split_over(lathe::SessionOptions options, lathe::vk::Context& vk) {
  options.stages = stage_layers(g_split, vk.devices(), options);
  options.link = g_link;
  return options;
}

void warm_up(lathe::Session& session, int64_t rows) {
  const bool cold = !session.pipelines_cached();
  const auto start = std::chrono::steady_clock::now();
  const bool terminal = isatty(STDERR_FILENO);
  const char* lead = cold ? "compiling kernels, once (they are cached for later runs)" : "preparing kernels";
  bool shown = false;
  lathe::Session::WarmUpProgress progress;
  if (cold || terminal)  // a warm start speaks only on a terminal, and only past a second
    progress = [&](const char* stage, int done, int stages) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (done == stages) {
        if (cold && terminal)
          std::fprintf(stderr, "\r%s: %d passes, %.1f s\033[K\n", lead, stages, s);
        else if (cold)
          std::fprintf(stderr, " %.1f s\n", s);
        else if (shown)
          std::fprintf(stderr, "\r\033[K");
      } else if (terminal) {
        if (cold || s >= 1.0) {
          std::fprintf(stderr, "\r%s: %s pass (%d/%d), %.1f s\033[K", lead, stage, done + 1, stages, s);
          shown = true;
        }
      } else if (done == 0) {
        std::fprintf(stderr, "%s: %s", lead, stage);
      } else {
        std::fprintf(stderr, ", %s", stage);
      }
      std::fflush(stderr);
    };
  session.warm_up(rows, progress);
}

std::vector<float> random_values(const lathe::ManifestEntry& e, uint64_t& state, float scale) {
  const bool norm = !e.bias && lathe::is_norm(e.role);
  const bool a_log = lathe::model_info().ssm_a_log;
  std::vector<float> values(static_cast<size_t>(e.elements()));
  for (float& v : values) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift64
    const float uniform = static_cast<float>(state >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
    const std::optional<double> ssm = lathe::ssm_parameter(e.role, e.bias, a_log, (uniform + 1.0) / 2.0);
    v = ssm ? static_cast<float>(*ssm) : (norm ? 1.0f : 0.0f) + scale * uniform;
  }
  return values;
}

std::unique_ptr<lathe::weights::Checkpoint> checked(const std::string& weights) {
  if (weights.empty()) return nullptr;
  return lathe::open_checkpoint(lathe::model_info(), weights);
}

void load_weights(lathe::Session& session, const lathe::weights::Checkpoint* checkpoint, bool check) {
  if (checkpoint) return session.load(*checkpoint, {.check_finite = check});
  const lathe::ModelInfo& m = session.model();
  uint64_t state = 7;
  for (size_t i = 0; i < m.manifest.size(); ++i) {
    const std::vector<float> values = random_values(m.manifest[i], state, 0.05f);
    session.upload(i, lathe::DType::F32, std::as_bytes(std::span(values)));
  }
}

std::string memory_text(const lathe::Session& session) {
  const lathe::Session::Memory m = session.memory();
  char text[96];
  std::snprintf(text, sizeof text, "weights %.2f MiB, KV cache %.2f MiB", static_cast<double>(m.weights) / (1 << 20),
                static_cast<double>(m.cache) / (1 << 20));
  std::string out = text;
  if (m.state > 0) {  // a Mamba model: its fixed state per sequence instead of a cache
    std::snprintf(text, sizeof text, ", Mamba state %.2f MiB", static_cast<double>(m.state) / (1 << 20));
    out += text;
  }
  return out;
}

std::vector<int32_t> parse_tokens(const std::string& text, const std::string& option) {
  std::string list = text;
  for (char& c : list)
    if (c == ',' || c == '[' || c == ']' || c == '\n' || c == '\t' || c == '\r') c = ' ';
  std::vector<int32_t> out;
  std::stringstream in(list);
  std::string item;
  while (in >> item) {
    const std::optional<long long> v = read_number<long long>(item);
    if (!v || *v < INT32_MIN || *v > INT32_MAX)
      throw Error(ErrorKind::InvalidArgument, option + ": '" + item + "' is not a token id");
    out.push_back(static_cast<int32_t>(*v));
  }
  if (out.empty()) throw Error(ErrorKind::InvalidArgument, option + ": no token ids given");
  return out;
}

lathe::text::Tokenizer load_tokenizer(const std::string& tokenizer, const std::string& weights,
                                      const std::string& needer) {
  namespace fs = std::filesystem;
  if (!tokenizer.empty()) {
    const fs::path p(tokenizer);
    if (p.extension() == ".model") return lathe::text::Tokenizer::from_sentencepiece(tokenizer);
    if (p.extension() == ".gguf") return lathe::text::Tokenizer::from_gguf(lathe::weights::GgufFile(tokenizer));
    return lathe::text::Tokenizer::from_hf(tokenizer);
  }
  if (weights.empty())
    throw Error(ErrorKind::InvalidArgument, needer + " needs a tokenizer: give --tokenizer, or --weights with one beside it");
  const fs::path w(weights);
  if (w.extension() == ".gguf") return lathe::text::Tokenizer::from_gguf(lathe::weights::GgufFile(weights));
  const fs::path dir = fs::is_directory(w) ? w : w.parent_path();
  if (fs::exists(dir / "tokenizer.json")) return lathe::text::Tokenizer::from_hf((dir / "tokenizer.json").string());
  if (fs::exists(dir / "tokenizer.model"))
    return lathe::text::Tokenizer::from_sentencepiece((dir / "tokenizer.model").string());
  throw Error(ErrorKind::NotFound, needer + " needs a tokenizer: no tokenizer.json or tokenizer.model in " +
                                       (dir.empty() ? std::string(".") : dir.string()) + "; give --tokenizer");
}

namespace {
lathe::SessionOptions draft_options(const lathe::ModelInfo& m, int64_t context, int64_t sequences) {
  if (m.max_context < context)
    throw Error(ErrorKind::InvalidArgument, "the draft " + std::string(m.name) + " holds " +
                                                std::to_string(m.max_context) + " positions, fewer than the " +
                                                std::to_string(context) + " of the context (lower --context)");
  lathe::SessionOptions so;
  so.context = context;
  so.sequences = sequences;
  so.max_chunk = std::max<int64_t>(so.max_chunk, sequences);
  return so;
}
}  // namespace

DraftSession::DraftSession(const lathe::ModelInfo& m, const std::string& weights, float min_p, bool check,
                           const lathe::text::Tokenizer& tokenizer, lathe::vk::Device& device, int64_t context,
                           int64_t sequences)
    : checkpoint(weights.empty() ? nullptr : lathe::open_checkpoint(m, weights)),
      session(device, m, draft_options(m, context, sequences)),
      model(session),
      draft(model, sequences, min_p) {
  if (!weights.empty() && has_tokenizer(weights)) {
    const std::string differs = lathe::text::vocabulary_mismatch(tokenizer, load_tokenizer("", weights, "--draft-weights"));
    if (!differs.empty())
      throw Error(ErrorKind::InvalidArgument, "--draft-weights " + weights + ": the draft's vocabulary is not the model's: " +
                                                  differs);
  }
  load_weights(session, checkpoint.get(), check);
  session.warm_up(std::min<int64_t>(session.context(), 64));
}

bool has_tokenizer(const std::string& weights) {
  namespace fs = std::filesystem;
  const fs::path w(weights);
  if (w.extension() == ".gguf") return true;
  const fs::path dir = fs::is_directory(w) ? w : w.parent_path();
  return fs::exists(dir / "tokenizer.json") || fs::exists(dir / "tokenizer.model");
}

std::string read_text_file(const std::string& path, const std::string& option) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::NotFound, option + " " + path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(ErrorKind::Io, option + " " + path + ": read failed");
  return text.str();
}

std::filesystem::path preprocessor_config(const std::string& weights, const std::string& option) {
  if (weights.empty())
    throw Error(ErrorKind::InvalidArgument,
                option + " needs the checkpoint's preprocessor_config.json: give -w the checkpoint (its directory)");
  const std::filesystem::path w(weights);
  const std::filesystem::path config =
      (std::filesystem::is_directory(w) ? w : w.parent_path()) / "preprocessor_config.json";
  if (!std::filesystem::exists(config))
    throw Error(ErrorKind::NotFound, option + ": " + config.string() +
                                         " does not exist (the image processor's settings, beside the checkpoint)");
  return config;
}

lathe::image::Preprocess mmproj_preprocess(const std::string& path) {
  const lathe::weights::GgufFile file(path);
  const auto required = [&](const char* key) {
    const std::optional<int64_t> v = file.integer(key);
    if (!v || *v < 1) throw Error(ErrorKind::BadFile, path + ": " + key + ": missing, or not a positive count");
    return *v;
  };
  const auto triple = [&](const char* key) {
    const auto it = file.metadata().find(key);
    const auto* list = it == file.metadata().end() ? nullptr : std::get_if<lathe::weights::GgufArray>(&it->second.value);
    nlohmann::json out = nlohmann::json::array();
    if (list != nullptr)
      for (const lathe::weights::GgufValue& item : list->items)
        if (const float* f = std::get_if<float>(&item.value)) out.push_back(*f);
    if (out.size() != 3) throw Error(ErrorKind::BadFile, path + ": " + key + ": three f32 values expected");
    return out;
  };
  const std::string type = file.string("clip.projector_type").value_or("");
  const int64_t size = required("clip.vision.image_size");
  nlohmann::json config = {{"image_mean", triple("clip.vision.image_mean")}, {"image_std", triple("clip.vision.image_std")}};
  if (type == "mlp") {  // LLaVA-1.5: CLIP's processor, the shorter side to image_size, then the middle square
    config["image_processor_type"] = "CLIPImageProcessor";
    config["size"] = {{"shortest_edge", size}};
    config["crop_size"] = {{"height", size}, {"width", size}};
  } else if (type == "gemma3") {  // a square of image_size, bilinear
    config["image_processor_type"] = "Gemma3ImageProcessor";
    config["size"] = {{"height", size}, {"width", size}};
  } else if (type == "pixtral") {  // the longer side at most image_size, whole patches
    const int64_t patch = required("clip.vision.patch_size");
    config["image_processor_type"] = "PixtralImageProcessor";
    config["size"] = {{"longest_edge", size}};
    config["patch_size"] = {{"height", patch}, {"width", patch}};
  } else {
    throw Error(ErrorKind::Unsupported, path + ": clip.projector_type \"" + type +
                                           "\": lathe reads the mlp, gemma3 and pixtral projectors");
  }
  return lathe::image::parse_preprocessor_config(config.dump(), path + " (its clip.vision.* keys)");
}

struct ImageEncoder::Impl {
  Impl(const std::string& weights, bool check, lathe::vk::Device& device, const lathe::ModelInfo& tower,
       const std::string& option)
      : preprocess(g_mmproj.empty() ? lathe::image::read_preprocessor_config(preprocessor_config(weights, option))
                                    : mmproj_preprocess(g_mmproj)),
        checkpoint(lathe::open_checkpoint(tower, g_mmproj.empty() ? weights : g_mmproj)),
        session(device, tower) {
    load_weights(session, checkpoint.get(), check);
  }
  lathe::image::Preprocess preprocess;
  std::unique_ptr<lathe::weights::Checkpoint> checkpoint;
  lathe::Session session;
};

ImageEncoder::ImageEncoder(const std::string& weights, bool check, lathe::vk::Device& device,
                           const std::string& option) {
  const lathe::ModelInfo* tower = lathe::vision_info();
  if (tower == nullptr || lathe::model_info().vision == nullptr)
    throw Error(ErrorKind::InvalidArgument,
                option + ": " + std::string(lathe::model_info().name) + " takes no images (its spec has no [vision] splice)");
  if (g_mmproj.empty() && std::filesystem::path(weights).extension() == ".gguf")
    throw Error(ErrorKind::InvalidArgument, option + ": " + weights +
                                                " is a GGUF text model, whose vision tower is in its mmproj file: give "
                                                "--mmproj FILE");
  impl_ = std::make_unique<Impl>(weights, check, device, *tower, option);
}

ImageEncoder::~ImageEncoder() = default;

lathe::Session& ImageEncoder::session() { return impl_->session; }

const lathe::image::Preprocess& ImageEncoder::preprocess() const { return impl_->preprocess; }

lathe::text::ImageFeatures ImageEncoder::encode(const std::string& file) {
  return lathe::text::encode_image(impl_->session, *lathe::model_info().vision, impl_->preprocess,
                                   lathe::image::load(file), file);
}

std::vector<lathe::text::ImageFeatures> image_features(const std::string& weights, const std::vector<std::string>& images,
                                                      bool check, lathe::vk::Device& device) {
  ImageEncoder encoder(weights, check, device);
  std::vector<lathe::text::ImageFeatures> out;
  for (const std::string& file : images) out.push_back(encoder.encode(file));
  return out;
}

}  // namespace lathe::cli

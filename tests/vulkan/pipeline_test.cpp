// Pipelines, their disk cache, descriptor sets and texel views on the chosen
// device, validation on: a real dispatch checked against the CPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "generator/emit/shader_compiler.hpp"
#include "runtime/error.hpp"
#include "runtime/vk/buffer.hpp"
#include "runtime/vk/descriptors.hpp"
#include "runtime/vk/pipeline.hpp"
#include "tests/harness/vulkan_harness.hpp"

using lathe::Error;
using lathe::ErrorKind;
using lathe::test::VulkanTest;
using namespace lathe::vk;
namespace fs = std::filesystem;

namespace {

// c[i] = a[i] * scale + b[i] + ADD, for i < n: a storage buffer, a uniform
// texel buffer (RGBA32F, so b[i] is component i % 4 of texel i / 4), a push
// constant block and a specialization constant besides the workgroup size.
constexpr const char* kScaleAdd = R"(#version 460
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ADD = 0;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(binding = 1) uniform samplerBuffer b;
layout(std430, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform Push { float scale; uint n; } pc;
void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= pc.n) return;
  c[i] = a[i] * pc.scale + texelFetch(b, int(i / 4))[i % 4] + float(ADD);
}
)";

struct Push {
  float scale;
  uint32_t n;
};

KernelCode scale_add() {
  static const std::vector<uint32_t> spirv = lathe::emit::compile_glsl("scale_add.comp", kScaleAdd);
  return {"scale_add", spirv.data(), spirv.size(), sizeof(Push)};
}

PipelineKey scale_add_key(uint32_t workgroup = 64, uint32_t add = 3) {
  return {"scale_add",
          {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER},
          {workgroup, add},
          sizeof(Push)};
}

// A fresh directory per test, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() /
           ("lathe-pipeline-test-" + std::to_string(std::random_device{}()) + "-" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::vector<std::byte> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

void write_bytes(const fs::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// The message of the Error `f` throws, after checking its kind.
template <typename F>
std::string error_of(F&& f, ErrorKind kind) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == kind);
    return e.what();
  }
  FAIL_CHECK("no error was thrown");
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_SUITE("pipeline") {

TEST_CASE_FIXTURE(VulkanTest, "a pipeline is created once per key, another spec constant is another pipeline") {
  Pipelines pipelines(device, "-");
  CHECK(pipelines.cache_path().empty());
  const Pipeline& first = pipelines.get(scale_add(), scale_add_key());
  CHECK(first.pipeline != VK_NULL_HANDLE);
  CHECK(*first.key == scale_add_key());
  CHECK(&pipelines.get(scale_add(), scale_add_key()) == &first);  // an equal key built anew
  CHECK(pipelines.size() == 1);

  const Pipeline& other = pipelines.get(scale_add(), scale_add_key(64, 4));
  CHECK(&other != &first);
  CHECK(other.pipeline != first.pipeline);
  CHECK(&pipelines.get(scale_add(), scale_add_key(32, 3)) != &first);
  CHECK(pipelines.size() == 3);
  CHECK(&pipelines.get(scale_add(), scale_add_key()) == &first);
  pipelines.save();  // a no-op without a disk cache
}

TEST_CASE_FIXTURE(VulkanTest, "many pipelines at once: the missing ones created on several threads, once per key") {
  Pipelines pipelines(device, "-");
  const Pipeline& existing = pipelines.get(scale_add(), scale_add_key(64, 0));
  std::vector<Pipelines::Request> requests;
  for (uint32_t add = 0; add < 12; ++add) requests.push_back({scale_add(), scale_add_key(64, add)});
  requests.push_back({scale_add(), scale_add_key(64, 5)});  // a repeat within the batch
  const std::vector<const Pipeline*> got = pipelines.get(requests, 4);
  REQUIRE(got.size() == requests.size());
  CHECK(got[0] == &existing);
  CHECK(got[12] == got[5]);
  CHECK(pipelines.size() == 12);
  for (size_t i = 0; i < 12; ++i) {
    CHECK(*got[i]->key == requests[i].key);
    CHECK(got[i] == &pipelines.get(requests[i].code, requests[i].key));  // one at a time finds the same
  }
  // A request that does not fit its code fails the batch, naming its kernel;
  // what the other threads created stays usable.
  std::vector<Pipelines::Request> bad;
  for (uint32_t add = 20; add < 24; ++add) bad.push_back({scale_add(), scale_add_key(64, add)});
  bad.push_back({scale_add(), scale_add_key(64, 30)});
  bad.back().key.push_size = 4;
  const std::string message = error_of([&] { pipelines.get(bad, 3); }, ErrorKind::InvalidArgument);
  CHECK(contains(message, "kernel 'scale_add'"));
  CHECK(contains(message, "push constants"));
  CHECK(pipelines.get(std::span(bad).first(4), 2).size() == 4);
  CHECK(pipelines.size() == 16);
}

TEST_CASE_FIXTURE(VulkanTest, "holders on one device and cache directory share pipelines while any of them lives") {
  std::shared_ptr<Pipelines> a = Pipelines::shared(device, "-");
  std::shared_ptr<Pipelines> b = Pipelines::shared(device, "-");
  CHECK(a == b);
  const Pipeline& first = a->get(scale_add(), scale_add_key());
  CHECK(&b->get(scale_add(), scale_add_key()) == &first);  // the second holder creates nothing
  CHECK(b->size() == 1);
  // The same name and key over other code (two model libraries' "argmax") is another pipeline.
  static const std::vector<uint32_t> copy(scale_add().spirv, scale_add().spirv + scale_add().words);
  const Pipeline& other = a->get(KernelCode{"scale_add", copy.data(), copy.size(), sizeof(Push)}, scale_add_key());
  CHECK(&other != &first);
  CHECK(a->size() == 2);
  TempDir dir;
  const std::shared_ptr<Pipelines> elsewhere = Pipelines::shared(device, dir.path.string());
  CHECK(elsewhere != a);  // another disk cache, another set
  CHECK(elsewhere->size() == 0);
  a.reset();
  b.reset();
  CHECK(Pipelines::shared(device, "-")->size() == 0);  // the last holder gone, the next starts afresh
}

TEST_CASE_FIXTURE(VulkanTest, "a dispatch reads a storage buffer at an offset and a texel buffer, with push and spec constants") {
  constexpr uint32_t n = 1000;  // not a multiple of the workgroup size: the bounds check matters
  const VkDeviceSize offset = std::max<VkDeviceSize>(device.info().min_storage_buffer_offset_alignment, 256);
  std::vector<float> a(n), b(n);
  for (uint32_t i = 0; i < n; ++i) {
    a[i] = 0.25f * static_cast<float>(i) - 100.0f;
    b[i] = static_cast<float>(i % 7) - 0.5f;
  }
  Buffer a_buffer(device, offset + n * sizeof(float), VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, MemoryUse::Device);
  Buffer b_buffer(device, n * sizeof(float), VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT, MemoryUse::Device);
  Buffer c_buffer(device, n * sizeof(float), VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, MemoryUse::Device);
  upload(device, a_buffer, a.data(), n * sizeof(float), offset);
  upload(device, b_buffer, b.data(), n * sizeof(float));
  TexelView b_view(device, b_buffer.handle(), VK_FORMAT_R32G32B32A32_SFLOAT, 0, n * sizeof(float));

  Pipelines pipelines(device, "-");
  const Pipeline& p = pipelines.get(scale_add(), scale_add_key(64, 3));
  DescriptorArena arena(device);
  const VkDescriptorSet set = arena.allocate(p);
  const Binding bindings[] = {BufferBinding{a_buffer.handle(), offset, n * sizeof(float)}, TexelBinding{b_view.handle()},
                              BufferBinding{c_buffer.handle(), 0, n * sizeof(float)}};
  write_descriptors(device, p, set, bindings);

  const Push push{2.0f, n};
  OneShot once(device);
  VkCommandBuffer commands = once.begin();
  vkCmdBindPipeline(commands, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  vkCmdBindDescriptorSets(commands, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  vkCmdPushConstants(commands, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
  vkCmdDispatch(commands, (n + 63) / 64, 1, 1);
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
  vkCmdPipelineBarrier(commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
  once.submit_and_wait();

  std::vector<float> c(n);
  download(device, c_buffer, c.data(), n * sizeof(float));
  for (uint32_t i = 0; i < n; ++i) {
    const float expected = a[i] * 2.0f + b[i] + 3.0f;  // exact in f32 for these values
    if (c[i] != expected) FAIL_CHECK("c[" << i << "] = " << c[i] << ", expected " << expected);
  }
}

TEST_CASE_FIXTURE(VulkanTest, "the disk cache is written on destruction and read by the next instance") {
  TempDir dir;
  std::string path;
  {
    Pipelines pipelines(device, dir.path.string());
    path = pipelines.cache_path();
    pipelines.get(scale_add(), scale_add_key());
    CHECK(!fs::exists(path));  // written on save or destruction, not before
  }
  REQUIRE(fs::exists(path));
  CHECK(fs::path(path).parent_path() == dir.path);
  std::string uuid;  // the file is named after the device's pipelineCacheUUID in hex
  for (uint8_t byte : device.info().pipeline_cache_uuid) {
    uuid += "0123456789abcdef"[byte >> 4];
    uuid += "0123456789abcdef"[byte & 15];
  }
  CHECK(contains(fs::path(path).filename().string(), uuid));
  const std::vector<std::byte> first = read_bytes(path);
  CHECK(first.size() >= sizeof(VkPipelineCacheHeaderVersionOne));
  CHECK(cache_header_matches(device.info(), first));
  size_t leftovers = 0;  // no temporary file stays behind
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path)) ++leftovers;
  CHECK(leftovers == 1);

  Pipelines again(device, dir.path.string());
  CHECK(again.cache_path() == path);
  const Pipeline& p = again.get(scale_add(), scale_add_key());
  CHECK(p.pipeline != VK_NULL_HANDLE);
  again.save();
  const std::vector<std::byte> second = read_bytes(path);
  CHECK(cache_header_matches(device.info(), second));
  // What the driver keeps of a loaded cache is its own business; lavapipe 22.x keeps only the header.
  MESSAGE("pipeline cache file: " << first.size() << " bytes, then " << second.size() << " bytes");
}

TEST_CASE_FIXTURE(VulkanTest, "a garbage, truncated or foreign cache file is ignored, not fatal") {
  TempDir dir;
  std::string path;
  std::vector<std::byte> valid;
  {
    Pipelines pipelines(device, dir.path.string());
    path = pipelines.cache_path();
    pipelines.get(scale_add(), scale_add_key());
    pipelines.save();
    valid = read_bytes(path);
  }
  REQUIRE(cache_header_matches(device.info(), valid));

  std::vector<std::byte> garbage(4096);
  std::mt19937 random(7);
  for (std::byte& b : garbage) b = static_cast<std::byte>(random());
  std::vector<std::byte> truncated(valid.begin(), valid.begin() + 20);
  std::vector<std::byte> foreign = valid;
  foreign[offsetof(VkPipelineCacheHeaderVersionOne, pipelineCacheUUID)] ^= std::byte{1};
  std::vector<std::byte> other_device = valid;
  other_device[offsetof(VkPipelineCacheHeaderVersionOne, deviceID)] ^= std::byte{1};
  std::vector<std::byte> too_long_header = valid;
  const uint32_t claimed = static_cast<uint32_t>(valid.size()) + 1;
  std::memcpy(too_long_header.data(), &claimed, sizeof(claimed));

  const std::pair<const char*, std::vector<std::byte>> cases[] = {
      {"garbage", garbage}, {"truncated", truncated}, {"empty", {}}, {"foreign UUID", foreign},
      {"other device", other_device}, {"header longer than the file", too_long_header}};
  for (const auto& [name, bytes] : cases) {
    CAPTURE(name);
    CHECK_FALSE(cache_header_matches(device.info(), bytes));
    write_bytes(path, bytes);
    {
      Pipelines pipelines(device, dir.path.string());
      CHECK(pipelines.get(scale_add(), scale_add_key()).pipeline != VK_NULL_HANDLE);
    }
    CHECK(cache_header_matches(device.info(), read_bytes(path)));  // replaced by a good one
  }
}

TEST_CASE_FIXTURE(VulkanTest, "an empty cache_dir means $LATHE_CACHE_DIR") {
  TempDir dir;
  const char* saved = std::getenv("LATHE_CACHE_DIR");
  const std::string previous = saved != nullptr ? saved : "";
  setenv("LATHE_CACHE_DIR", dir.path.c_str(), 1);
  const std::string path = Pipelines(device).cache_path();
  if (saved != nullptr) setenv("LATHE_CACHE_DIR", previous.c_str(), 1);
  else unsetenv("LATHE_CACHE_DIR");
  CHECK(fs::path(path).parent_path() == dir.path);
  CHECK(!fs::exists(path));  // nothing created, nothing written
}

TEST_CASE_FIXTURE(VulkanTest, "a key that does not fit its code is refused, naming the kernel") {
  Pipelines pipelines(device, "-");
  PipelineKey key = scale_add_key();
  key.push_size = 4;
  CHECK(contains(error_of([&] { pipelines.get(scale_add(), key); }, ErrorKind::InvalidArgument),
                 "kernel 'scale_add': the key has 4 bytes of push constants, the code 8"));
  key = scale_add_key();
  key.kernel = "other";
  CHECK(contains(error_of([&] { pipelines.get(scale_add(), key); }, ErrorKind::InvalidArgument), "kernel 'other'"));
  key = scale_add_key();
  key.bindings[1] = VK_DESCRIPTOR_TYPE_SAMPLED_IMAGE;
  CHECK(contains(error_of([&] { pipelines.get(scale_add(), key); }, ErrorKind::InvalidArgument), "binding 1"));
  CHECK(pipelines.size() == 0);
}

TEST_CASE_FIXTURE(VulkanTest, "write_descriptors refuses a wrong kind, count, range or offset with the numbers") {
  Pipelines pipelines(device, "-");
  const Pipeline& p = pipelines.get(scale_add(), scale_add_key());
  DescriptorArena arena(device);
  const VkDescriptorSet set = arena.allocate(p);
  Buffer buffer(device, 4096, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT,
                MemoryUse::Device);
  TexelView view(device, buffer.handle(), VK_FORMAT_R32G32B32A32_UINT, 0, 4096);
  const BufferBinding storage{buffer.handle(), 0, 4096};
  const TexelBinding texel{view.handle()};

  const Binding swapped[] = {texel, storage, storage};
  std::string message = error_of([&] { write_descriptors(device, p, set, swapped); }, ErrorKind::InvalidArgument);
  CHECK(contains(message, "kernel 'scale_add' binding 0 is a storage buffer but a texel view was given"));
  const Binding texel_as_storage[] = {storage, storage, storage};
  message = error_of([&] { write_descriptors(device, p, set, texel_as_storage); }, ErrorKind::InvalidArgument);
  CHECK(contains(message, "kernel 'scale_add' binding 1 is a uniform texel buffer"));
  const Binding too_few[] = {storage, texel};
  message = error_of([&] { write_descriptors(device, p, set, too_few); }, ErrorKind::InvalidArgument);
  CHECK(contains(message, "kernel 'scale_add' has 3 bindings, 2 were given"));

  const uint64_t max_range = device.info().max_storage_buffer_range;
  const Binding too_long[] = {storage, texel, BufferBinding{buffer.handle(), 0, max_range + 1}};
  message = error_of([&] { write_descriptors(device, p, set, too_long); }, ErrorKind::InvalidArgument);
  CHECK(contains(message, "binding 2: a range of " + std::to_string(max_range + 1) + " bytes exceeds maxStorageBufferRange (" +
                              std::to_string(max_range) + ")"));
  const uint32_t align = device.info().min_storage_buffer_offset_alignment;
  if (align > 1) {
    const Binding misaligned[] = {BufferBinding{buffer.handle(), align / 2, 64}, texel, storage};
    message = error_of([&] { write_descriptors(device, p, set, misaligned); }, ErrorKind::InvalidArgument);
    CHECK(contains(message, "binding 0: offset " + std::to_string(align / 2) +
                                " is not a multiple of minStorageBufferOffsetAlignment (" + std::to_string(align) + ")"));
  }
  const Binding good[] = {storage, texel, storage};
  write_descriptors(device, p, set, good);
}

TEST_CASE_FIXTURE(VulkanTest, "a texel view past maxTexelBufferElements or at a misaligned offset is refused with the numbers") {
  Buffer buffer(device, 4096, VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT, MemoryUse::Device);
  const uint64_t max = device.info().max_texel_buffer_elements;
  std::string message = error_of([&] { TexelView(device, buffer.handle(), VK_FORMAT_R32G32B32A32_UINT, 0, (max + 1) * 16); },
                                 ErrorKind::OutOfMemory);
  CHECK(contains(message, std::to_string(max + 1) + " texels exceed maxTexelBufferElements (" + std::to_string(max) + ")"));
  const uint32_t align = device.info().min_texel_buffer_offset_alignment;
  CHECK(align > 0);
  if (align > 4) {
    message = error_of([&] { TexelView(device, buffer.handle(), VK_FORMAT_R32_SFLOAT, 4, 64); }, ErrorKind::InvalidArgument);
    CHECK(contains(message, "offset 4 is not a multiple of minTexelBufferOffsetAlignment (" + std::to_string(align) + ")"));
  }
  message = error_of([&] { TexelView(device, buffer.handle(), VK_FORMAT_R32G32B32A32_SFLOAT, 0, 24); }, ErrorKind::InvalidArgument);
  CHECK(contains(message, "not a whole number of 16-byte texels"));

  TexelView view(device, buffer.handle(), VK_FORMAT_R32G32B32A32_SFLOAT, align, 1024);
  const VkBufferView handle = view.handle();
  TexelView moved(std::move(view));
  CHECK(moved.handle() == handle);
  CHECK(view.handle() == VK_NULL_HANDLE);  // a moved-from view owns nothing
  view = std::move(moved);
  CHECK(view.handle() == handle);
}

TEST_CASE_FIXTURE(VulkanTest, "the descriptor arena grows past one pool") {
  Pipelines pipelines(device, "-");
  const Pipeline& p = pipelines.get(scale_add(), scale_add_key());
  Buffer buffer(device, 4096, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT,
                MemoryUse::Device);
  TexelView view(device, buffer.handle(), VK_FORMAT_R32G32B32A32_SFLOAT, 0, 4096);
  const Binding bindings[] = {BufferBinding{buffer.handle(), 0, 1024}, TexelBinding{view.handle()},
                              BufferBinding{buffer.handle(), 1024, 1024}};
  DescriptorArena arena(device);
  std::vector<VkDescriptorSet> sets;
  for (int i = 0; i < 700; ++i) {  // pools of 256 sets: three of them
    sets.push_back(arena.allocate(p));
    write_descriptors(device, p, sets.back(), bindings);
  }
  std::sort(sets.begin(), sets.end());
  CHECK(std::adjacent_find(sets.begin(), sets.end()) == sets.end());
}

}  // TEST_SUITE("pipeline")

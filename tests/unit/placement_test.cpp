// A model's layers placed on several devices (generator/spec/placement.hpp):
// the bytes each device holds add up to the single device's, a split by
// memory follows the devices' sizes and fits wherever a placement does, layer counts are taken as given, and
// bad options are refused naming them.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "core/balance.hpp"
#include "generator/spec/parse.hpp"
#include "generator/spec/placement.hpp"
#include "generator/spec/report.hpp"

using namespace lathe::spec;

namespace {

Spec load(const std::string& file) {
  Diagnostics diagnostics(file);
  const auto s = parse_spec_file((std::filesystem::path(LATHE_SOURCE_DIR) / file).string(), diagnostics);
  REQUIRE_MESSAGE(s, diagnostics.format());
  return *s;
}

constexpr int64_t GiB = int64_t{1} << 30;

}  // namespace

TEST_SUITE("placement") {

TEST_CASE("a split holds every byte of the single device once, the layers in order, embedding first and head last") {
  for (const char* file : {"models/llama-3-8b.toml", "models/mixtral-8x7b.toml", "models/gemma-2-2b.toml",
                           "models/bamba-9b.toml", "models/deepseek-v2-lite.toml", "models/mamba2-130m.toml"}) {
    CAPTURE(file);
    const Spec s = load(file);
    const Report r = make_report(s);
    const int64_t context = std::min<int64_t>(s.dims.max_context, 4096);
    const Placement one = place(s, r, std::vector<int64_t>{1024 * GiB}, std::nullopt, context);
    REQUIRE(one.devices.size() == 1);
    CHECK(one.devices[0].weights == r.device_weight_bytes);
    // The single device's need is the report's weights and cache at that context.
    for (const auto& [L, bytes] : r.device_bytes_at_context)
      if (L == context) CHECK(one.devices[0].need() == bytes);
    for (const int64_t n : {2, 3, 4}) {
      CAPTURE(n);
      const Placement p = place(s, r, std::vector<int64_t>(static_cast<size_t>(n), 1024 * GiB), std::nullopt, context);
      REQUIRE(p.devices.size() == static_cast<size_t>(n));
      int64_t weights = 0, cache = 0, next = 0;
      for (const DeviceShare& d : p.devices) {
        CHECK(d.first_layer == next);
        CHECK(d.end_layer > d.first_layer);
        next = d.end_layer;
        weights += d.weights;
        cache += d.cache;
      }
      CHECK(next == s.blocks());
      CHECK(p.devices.front().embedding);
      CHECK(p.devices.back().head);
      // A tied head on the last device reads a copy of the embedding table there.
      CHECK(weights == r.device_weight_bytes + (s.embedding.tied ? r.embedding_table_device_bytes : 0));
      CHECK(cache == one.devices[0].cache);
      CHECK(p.fits());
    }
  }
}

TEST_CASE("by memory each device takes a share for its size, layer counts are taken as given") {
  const Spec s = load("models/llama-3-8b.toml");
  const Report r = make_report(s);
  const Placement even = place(s, r, std::vector<int64_t>{8 * GiB, 8 * GiB}, std::nullopt, 8192);
  CHECK(even.devices[0].end_layer == 16);  // 32 equal layers, the embedding and head alike
  CHECK(even.fits());
  const Placement uneven = place(s, r, std::vector<int64_t>{24 * GiB, 4 * GiB}, std::nullopt, 8192);
  CHECK(uneven.devices[0].end_layer == 29);
  CHECK(uneven.fits());
  const Placement given = place(s, r, std::vector<int64_t>{24 * GiB, 4 * GiB}, std::vector<int64_t>{16, 16}, 8192);
  CHECK(given.devices[0].end_layer == 16);
  CHECK_FALSE(given.devices[1].fits());  // half of 15 GiB on a 4 GiB device
  CHECK_FALSE(given.fits());
  const std::string text = format_placement(given);
  CHECK(text.find("Does not fit: device 0 needs") != std::string::npos);
  CHECK(text.find("device 1 needs") != std::string::npos);
  CHECK(placement_json(given)["devices"][1]["fits"] == false);
  // The caches of more sequences and longer contexts move the split.
  const Placement four = place(s, r, std::vector<int64_t>{24 * GiB, 24 * GiB}, std::nullopt, 8192, 4);
  CHECK(four.devices[0].cache == int64_t{4} * 16 * 8192 * 2 * 8 * 128 * 2);  // 16 layers × K and V of 8 heads of 128, f16
}

// Mixtral over four 24 GiB devices at 8192 positions: layers 8/8/8/8 fit
// each with 2 GiB to spare; a split in proportion to the devices' sizes
// gave 7/9/8/8, 26.4 GB on device 1. By memory finds the placement whose
// largest share is least, which fits whenever any does.
TEST_CASE("by memory finds a placement that fits wherever one does: Mixtral over four 24 GiB devices") {
  const Spec s = load("models/mixtral-8x7b.toml");
  const Report r = make_report(s);
  const std::vector<int64_t> four(4, 24 * GiB);
  const Placement given = place(s, r, four, std::vector<int64_t>{8, 8, 8, 8}, 8192);
  REQUIRE(given.fits());
  const Placement p = place(s, r, four, std::nullopt, 8192);
  CHECK(p.fits());
  int64_t largest = 0, given_largest = 0;
  for (const DeviceShare& d : p.devices) largest = std::max(largest, d.need());
  for (const DeviceShare& d : given.devices) given_largest = std::max(given_largest, d.need());
  CHECK(largest <= given_largest);
  CHECK(format_placement(p).find("Does not fit") == std::string::npos);
}

TEST_CASE("balance::by_memory: contiguous runs, each device one layer or more, the largest share least") {
  namespace balance = lathe::balance;
  // Equal layers, equal devices: as even as they divide.
  CHECK(*balance::by_memory(std::vector<int64_t>(8, 10), std::vector<int64_t>{100, 100}) == std::vector<int64_t>{4, 4});
  // The first device's fixed bytes (an embedding) push layers to the next.
  CHECK(*balance::by_memory(std::vector<int64_t>(8, 10), std::vector<int64_t>{100, 100}, 20) == std::vector<int64_t>{3, 5});
  // A device twice the size takes twice the layers.
  CHECK(*balance::by_memory(std::vector<int64_t>(9, 10), std::vector<int64_t>{200, 100}) == std::vector<int64_t>{6, 3});
  // Uneven layers: one heavy layer alone on a device.
  CHECK(*balance::by_memory(std::vector<int64_t>{50, 10, 10, 10, 10, 10}, std::vector<int64_t>{60, 60}) ==
        std::vector<int64_t>{1, 5});
  // Every device keeps a layer, however small.
  CHECK(*balance::by_memory(std::vector<int64_t>{10, 10, 10}, std::vector<int64_t>{1000, 1, 1}) == std::vector<int64_t>{1, 1, 1});
  // A placement over the capacities is still the most balanced one.
  const auto over = balance::by_memory(std::vector<int64_t>(4, 100), std::vector<int64_t>{100, 100});
  CHECK(*over == std::vector<int64_t>{2, 2});
  CHECK_FALSE(balance::by_memory(std::vector<int64_t>(2, 10), std::vector<int64_t>{100, 100, 100}));  // more devices than layers
  CHECK_FALSE(balance::by_memory(std::vector<int64_t>(2, 10), std::vector<int64_t>{100, 0}));
}

TEST_CASE("placement options are refused naming the option") {
  const Spec s = load("models/llama-3-8b.toml");
  const Report r = make_report(s);
  const std::vector<int64_t> two{24 * GiB, 24 * GiB};
  CHECK_THROWS_WITH_AS(place(s, r, two, std::vector<int64_t>{16, 15}, 8192),
                       "--split: the layer counts sum to 31, the model has 32 layers", PlacementError);
  CHECK_THROWS_WITH_AS(place(s, r, two, std::vector<int64_t>{32}, 8192),
                       "--split: 1 layer counts for 2 devices (--devices)", PlacementError);
  CHECK_THROWS_WITH_AS(place(s, r, std::vector<int64_t>(33, GiB), std::nullopt, 8192),
                       "--devices: 33 devices for 32 layers (each holds one at least)", PlacementError);
  CHECK_THROWS_WITH_AS(place(s, r, two, std::nullopt, 1 << 20), doctest::Contains("--context: 1048576 is outside"),
                       PlacementError);
  CHECK(parse_capacities("24GiB,80GB") == std::vector<int64_t>{24 * GiB, 80'000'000'000});
  CHECK_THROWS_WITH_AS(parse_capacities("24GiB,,"), doctest::Contains("--devices: \"\" is not an amount of memory"),
                       PlacementError);
  CHECK_FALSE(parse_split("memory"));
  CHECK(*parse_split("layers:16,16") == std::vector<int64_t>{16, 16});
  CHECK_THROWS_WITH_AS(parse_split("layers:16,x"), "--split: \"x\" is not a count of layers (1 or more)", PlacementError);
  CHECK_THROWS_WITH_AS(parse_split("half"), doctest::Contains("--split: \"half\" is neither memory"), PlacementError);
  CHECK_THROWS_WITH_AS(place(load("models/t5-small.toml"), make_report(load("models/t5-small.toml")), two, std::nullopt, 512),
                       doctest::Contains("encoder-decoder"), PlacementError);
}

}  // TEST_SUITE

// A program of one's own on a generated model library: a session of the
// build, a checkpoint, greedy token ids out.
//
//   hello CHECKPOINT
#include <iostream>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/model/model_info.hpp"  // lathe::model_info(): the generated build
#include "runtime/model/session.hpp"
#include "runtime/vk/device.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " CHECKPOINT\n";
    return 2;
  }
  try {
    const lathe::ModelInfo& model = lathe::model_info();
    lathe::vk::Context vk;  // LATHE_DEVICE, else the best device
    lathe::Session session(vk.device(), model);
    session.load(argv[1]);
    const std::vector<int32_t> prompt = {1, 2, 3};
    session.prefill(prompt);
    std::cout << model.name << " (" << model.total_params << " parameters) on " << vk.device().info().name << ":";
    // 8 greedy tokens, as `generate -n 8` prints them: the prompt's pick, then 7 steps.
    const int32_t first = session.argmax();
    std::cout << " " << first;
    for (int32_t token : session.generate_greedy(first, 7)) std::cout << " " << token;
    std::cout << "\n";
  } catch (const lathe::Error& e) {
    std::cerr << argv[0] << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}

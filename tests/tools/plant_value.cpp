// Test tool: a copy of a safetensors checkpoint with one value replaced, for
// the tests of what a NaN or an infinity in the weights does.
//
//   lathe_plant_value IN.safetensors OUT.safetensors TENSOR INDEX VALUE
//     VALUE: nan, inf, -inf or a number; INDEX counts the tensor's values
//     row-major. Every other tensor and the metadata are copied as they are.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/weights/dtype.hpp"
#include "runtime/weights/safetensors.hpp"

int main(int argc, char** argv) {
  using namespace lathe::weights;
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s IN.safetensors OUT.safetensors TENSOR INDEX VALUE\n", argv[0]);
    return 2;
  }
  try {
    const SafetensorsFile in(argv[1]);
    const std::string name = argv[3];
    const size_t index = std::stoull(argv[4]);
    const float value = std::strtof(argv[5], nullptr);  // strtof reads nan, inf and -inf
    std::vector<TensorToWrite> tensors;
    bool planted = false;
    for (const TensorInfo& t : in.tensors()) {
      const auto bytes = in.data(t);
      TensorToWrite out{t.name, t.dtype, t.shape, std::vector<std::byte>(bytes.begin(), bytes.end())};
      if (t.name == name) {
        const size_t size = dtype_size(t.dtype);
        if ((index + 1) * size > out.data.size()) throw std::runtime_error(name + ": index " + argv[4] + " is outside it");
        store_element(t.dtype, value, &out.data[index * size]);
        planted = true;
      }
      tensors.push_back(std::move(out));
    }
    if (!planted) throw std::runtime_error(name + ": no such tensor in " + argv[1]);
    write_safetensors(argv[2], tensors, in.metadata());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
  return 0;
}

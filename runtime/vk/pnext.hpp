// Links Vulkan structures into a pNext chain in the order they are added,
// so that each can be added only where the device has its extension (as
// validation requires) without hand-threading the pointers.
#pragma once

namespace lathe::vk {

class PNextChain {
 public:
  explicit PNextChain(void** head) : tail_(head) {}
  template <typename Struct>
  void add(Struct& s) {
    *tail_ = &s;
    tail_ = &s.pNext;
  }

 private:
  void** tail_;
};

}  // namespace lathe::vk

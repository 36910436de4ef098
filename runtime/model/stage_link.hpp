// The messages between the processes of a model split over machines: each
// a rank, each running one pipeline stage of the layers (SessionOptions::
// stages and ::link). The runtime calls this interface; the model
// executable implements it over MPI (cli/model/ranks.cpp), so the runtime
// libraries link no MPI.
#pragma once

#include <cstddef>

namespace lathe {

class StageLink {
 public:
  virtual ~StageLink() = default;
  virtual int rank() const = 0;   // this process's: 0 runs the embedding and the API
  virtual int ranks() const = 0;  // one a stage
  // Blocking point-to-point messages whose sizes both sides know (the
  // session's plan and its pass's rows size them).
  virtual void send(int to, const void* data, size_t bytes) = 0;
  virtual void receive(int from, void* data, size_t bytes) = 0;
  // Rank 0's: whether a session has told the other ranks how to build
  // their stages. One that ends without doing so tells them to stop.
  bool configured = false;
};

}  // namespace lathe

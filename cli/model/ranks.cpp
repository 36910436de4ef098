// A model split over processes (common.hpp): under `mpirun -np N`, the
// MPI link between the ranks, and the loop of a rank above 0, which runs
// its pipeline stage of the layers for rank 0's command. A build without
// MPI (no LATHE_HAVE_MPI) refuses to run under mpirun.
#include "cli/model/common.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#ifdef LATHE_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only: no C++ bindings to link
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

#include "runtime/error.hpp"
#include "runtime/model/model_info.hpp"

namespace lathe::cli {

#ifdef LATHE_HAVE_MPI
namespace {

class MpiLink final : public lathe::StageLink {
 public:
  MpiLink() {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks_);
  }
  ~MpiLink() override {
    if (rank_ == 0 && !configured) lathe::Session::stop_stages(*this);
    MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  // In pieces under 2 GiB: MPI counts are ints.
  void send(int to, const void* data, size_t bytes) override {
    size_t at = 0;
    do {
      const int n = static_cast<int>(std::min(kPiece, bytes - at));
      check(MPI_Send(static_cast<const char*>(data) + at, n, MPI_BYTE, to, 0, MPI_COMM_WORLD), "MPI_Send", to);
      at += static_cast<size_t>(n);
    } while (at < bytes);
  }
  void receive(int from, void* data, size_t bytes) override {
    size_t at = 0;
    do {
      const int n = static_cast<int>(std::min(kPiece, bytes - at));
      check(MPI_Recv(static_cast<char*>(data) + at, n, MPI_BYTE, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv",
            from);
      at += static_cast<size_t>(n);
    } while (at < bytes);
  }
  // Ends every rank: no rank waits on one that failed.
  [[noreturn]] void abort(int code) {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);
  }

 private:
  static constexpr size_t kPiece = size_t{1} << 30;
  void check(int result, const char* what, int peer) const {
    if (result != MPI_SUCCESS)
      throw lathe::Error(lathe::ErrorKind::Io, std::string(what) + " between ranks " + std::to_string(rank_) + " and " +
                                                   std::to_string(peer) + " failed (" + std::to_string(result) + ")");
  }
  int rank_ = 0, ranks_ = 1;
};

}  // namespace
#endif

std::unique_ptr<lathe::StageLink> open_link(const char* program) {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!size || std::atoi(size) <= 1) return nullptr;
#ifdef LATHE_HAVE_MPI
  (void)program;
  return std::make_unique<MpiLink>();
#else
  std::cerr << program << ": launched by mpirun with " << size
            << " ranks, but this build has no MPI (install libopenmpi-dev and rebuild)\n";
  std::exit(1);
#endif
}

[[noreturn]] void abort_ranks(lathe::StageLink& link, int code) {
#ifdef LATHE_HAVE_MPI
  static_cast<MpiLink&>(link).abort(code);
#else
  (void)link;
  std::exit(code);
#endif
}

int run_stage_rank(int argc, char** argv, lathe::StageLink& link) {
  std::string weights, device;
  bool check = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&](const std::string& s, const std::string& l, std::string& out) {
      if ((a == s || a == l) && i + 1 < argc) out = argv[++i];
      else if (a.rfind(l + "=", 0) == 0) out = a.substr(l.size() + 1);
    };
    value("-w", "--weights", weights);
    value("-d", "--device", device);
    if (a == "--no-check") check = false;
  }
  const std::string me = std::string(argv[0]) + " (rank " + std::to_string(link.rank()) + ")";
  try {
    lathe::vk::Context vk(device_options(device));
    lathe::Session::serve_stage(vk.device(), lathe::model_info(), link, [&](lathe::Session& session) {
      if (weights.empty())  // (a command without a session, such as info, never gets here)
        throw lathe::Error(lathe::ErrorKind::InvalidArgument,
                           "the command gives no --weights: every rank loads its stage's weights from its own copy");
      session.load(*lathe::open_checkpoint(lathe::model_info(), weights), lathe::Session::LoadOptions{check});
    });
  } catch (const std::exception& e) {
    // One write: mpirun interleaves the ranks' output (and its own notice) by write.
    const std::string line = me + ": " + e.what() + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
    abort_ranks(link, 1);
  }
  return 0;
}

}  // namespace lathe::cli

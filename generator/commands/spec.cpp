// A spec, read and written: report (its numbers, where a split puts its
// layers, its pictures), lint (advice on its hyperparameters), audit (a
// checkpoint's contract) and design (a spec from a budget).
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "generator/commands/commands.hpp"
#include "generator/commands/common.hpp"
#include "generator/driver/process.hpp"
#include "generator/import/audit.hpp"
#include "generator/spec/design.hpp"
#include "generator/spec/lint.hpp"
#include "generator/spec/placement.hpp"
#include "generator/spec/report.hpp"
#include "runtime/error.hpp"
#include "runtime/vk/device_info.hpp"
#include "runtime/vk/instance.hpp"

namespace lathe::tool {
namespace {

// Writes `text` to `path`; false (and why, naming the file and the option)
// when it cannot.
bool write_file(const std::string& path, const std::string& text, const char* option) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (file) file << text;
  if (file) file.close();
  if (!file) {
    std::cerr << "lathe report: " << option << " " << path << ": cannot write: " << std::strerror(errno) << "\n";
    return false;
  }
  return true;
}

// The report's pictures as a PNG: rsvg-convert (librsvg) renders the SVG,
// read from a temporary file beside nothing else lathe writes.
bool write_png(const std::string& path, const std::string& svg) {
  // The PNG's path is checked first, so that its error names it rather
  // than leaving rsvg-convert's to explain.
  if (!write_file(path, "", "--png")) return false;
  std::string temp = (std::filesystem::temp_directory_path() / "lathe-report-XXXXXX.svg").string();
  const int fd = mkstemps(temp.data(), 4);
  if (fd < 0) {
    std::cerr << "lathe report: --png: cannot create a temporary file in "
              << std::filesystem::temp_directory_path().string() << ": " << std::strerror(errno) << "\n";
    return false;
  }
  close(fd);
  const bool written = write_file(temp, svg, "--png");
  const lathe::driver::Command command = {"rsvg-convert", "--format", "png", "--output", path, temp};
  const int status = written ? lathe::driver::run_all({command}).front() : 1;
  std::filesystem::remove(temp);
  std::error_code ignored;
  if (status != 0) std::filesystem::remove(path, ignored);  // no empty PNG left behind
  if (!written) return false;
  if (status == 127) {
    std::cerr << "lathe report: --png needs rsvg-convert on the PATH (Debian and Ubuntu: the librsvg2-bin package); "
                 "--svg writes the SVG without it\n";
    return false;
  }
  if (status != 0) {
    std::cerr << "lathe report: --png " << path << ": rsvg-convert failed (exit status " << status << ")\n";
    return false;
  }
  return true;
}

// --devices: amounts of memory (24GiB) or devices of this machine by index
// or name (0, llvmpipe): a device's memory as a session counts it
// (vk::device_memory; said on stderr). Throws PlacementError naming an item
// that is neither.
std::vector<int64_t> device_capacities(const std::string& text) {
  std::vector<int64_t> out;
  std::unique_ptr<lathe::vk::Instance> instance;  // opened at the first device named
  std::vector<lathe::vk::DeviceInfo> devices;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    try {
      out.push_back(lathe::spec::parse_capacities(item).front());
      continue;
    } catch (const lathe::spec::PlacementError& e) {
      if (item.empty()) throw;
    }
    try {
      if (!instance) {
        instance = std::make_unique<lathe::vk::Instance>();
        devices = lathe::vk::query_devices(*instance);
      }
      const lathe::vk::DeviceInfo& d = lathe::vk::select_device(devices, item);
      const lathe::vk::DeviceMemory memory = lathe::vk::device_memory(d);
      std::cerr << "--devices: " << item << " is [" << d.index << "] " << d.name << ", " << (memory.bytes >> 20) << " MiB"
                << (memory.host ? " (the host's memory)" : "")
                << (memory.available > 0 ? ", " + std::to_string(memory.available >> 20) + " MiB of it available now" : "")
                << "\n";
      out.push_back(static_cast<int64_t>(memory.bytes));
    } catch (const lathe::Error& e) {
      throw lathe::spec::PlacementError("--devices: \"" + item + "\" is neither an amount of memory (24GiB) nor a device of " +
                                        "this machine (" + e.what() + ")");
    }
  }
  return out;
}

}  // namespace

int cmd_report(const std::string& path, bool json, const std::vector<int64_t>& prefill,
               const std::vector<int64_t>& decode, const std::string& svg_path, const std::string& png_path,
               const SplitOptions& split) {
  auto spec = load_spec(path);
  if (!spec) return 1;
  const auto report = lathe::spec::make_report(*spec, prefill, decode);
  std::optional<lathe::spec::Placement> placement;
  if (!split.devices.empty()) {
    try {
      placement = lathe::spec::place(*spec, report, device_capacities(split.devices),
                                     lathe::spec::parse_split(split.split),
                                     split.context ? split.context : spec->dims.max_context, split.sequences);
    } catch (const lathe::spec::PlacementError& e) {
      std::cerr << "lathe report: " << e.what() << "\n";
      return 2;
    }
  }
  if (json) {
    nlohmann::json j = lathe::spec::report_json(report);
    if (placement) j["placement"] = lathe::spec::placement_json(*placement);
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << lathe::spec::format_report(report);
    if (placement) std::cout << lathe::spec::format_placement(*placement);
  }
  const int status = placement && !placement->fits() ? 1 : 0;
  if (svg_path.empty() && png_path.empty()) return status;
  const std::string svg = lathe::spec::report_svg(report, placement ? &*placement : nullptr);
  if (!svg_path.empty() && !write_file(svg_path, svg, "--svg")) return 1;
  if (!png_path.empty() && !write_png(png_path, svg)) return 1;
  return status;
}

int cmd_lint(const std::string& path) {
  auto spec = load_spec(path);
  if (!spec) return 1;
  const std::vector<lathe::spec::Advice> advice = lathe::spec::lint(*spec);
  std::cout << lathe::spec::format_advice(path, advice);
  if (advice.empty()) std::cout << path << ": every hyperparameter lint knows is within practice\n";
  return 0;
}

int cmd_audit(const std::string& path, bool json) {
  const lathe::importer::AuditResult result = lathe::importer::audit_checkpoint(path);
  if (json) std::cout << lathe::importer::audit_json(result).dump(2) << "\n";
  else std::cout << lathe::importer::format_audit(result);
  return result.count(lathe::importer::AuditStatus::Error) > 0 ? 1 : 0;
}

int cmd_design(lathe::spec::DesignArgs args, const std::string& out, bool explain, int argc, char** argv) {
  // The command quoted in the spec: its options, not where it was written
  // or whether it explained itself.
  args.command = "lathe";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-o" || a == "--out") ++i;
    else if (!a.starts_with("--out=") && !(a.starts_with("-o") && a.size() > 2) && a != "--explain") args.command += " " + a;
  }
  lathe::spec::Design design;
  try {
    design = lathe::spec::design(lathe::spec::design_options(args));
  } catch (const lathe::spec::DesignError& e) {
    std::cerr << "lathe design: " << e.what() << "\n";
    return 2;
  }
  if (explain)
    for (const std::string& line : design.explanation) std::cerr << line << "\n";
  if (out.empty()) {
    std::cout << design.spec;
    return 0;
  }
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  if (file) file << design.spec;
  if (file) file.close();
  if (!file) {
    std::cerr << "lathe design: -o " << out << ": cannot write: " << std::strerror(errno) << "\n";
    return 1;
  }
  std::cerr << out << " (written)\n";
  return 0;
}

}  // namespace lathe::tool

#include "generator/clang/check.hpp"

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/FileManager.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/FrontendActions.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/VirtualFileSystem.h>

#include <algorithm>
#include <memory>

#ifndef LATHE_CLANG_RESOURCE_DIR
#error "LATHE_CLANG_RESOURCE_DIR (Clang's resource directory) must be defined by the build"
#endif

namespace lathe::clang {
namespace {

// Keeps every diagnostic, located by its presumed location (after #line).
class Collector : public ::clang::DiagnosticConsumer {
 public:
  explicit Collector(std::vector<CheckDiagnostic>& out) : out_(out) {}

  void HandleDiagnostic(::clang::DiagnosticsEngine::Level level, const ::clang::Diagnostic& info) override {
    DiagnosticConsumer::HandleDiagnostic(level, info);  // counts
    CheckDiagnostic d;
    switch (level) {
      case ::clang::DiagnosticsEngine::Ignored: return;
      case ::clang::DiagnosticsEngine::Note:
      case ::clang::DiagnosticsEngine::Remark: d.severity = CheckDiagnostic::Severity::Note; break;
      case ::clang::DiagnosticsEngine::Warning: d.severity = CheckDiagnostic::Severity::Warning; break;
      case ::clang::DiagnosticsEngine::Error:
      case ::clang::DiagnosticsEngine::Fatal: d.severity = CheckDiagnostic::Severity::Error; break;
    }
    llvm::SmallString<256> message;
    info.FormatDiagnostic(message);
    d.message = std::string(message.str());
    if (info.hasSourceManager() && info.getLocation().isValid()) {
      const ::clang::PresumedLoc where = info.getSourceManager().getPresumedLoc(info.getLocation());
      if (where.isValid()) {
        d.file = where.getFilename();
        d.line = where.getLine();
        d.column = where.getColumn();
      }
    }
    out_.push_back(std::move(d));
  }

 private:
  std::vector<CheckDiagnostic>& out_;
};

const char* severity_name(CheckDiagnostic::Severity s) {
  switch (s) {
    case CheckDiagnostic::Severity::Note: return "note";
    case CheckDiagnostic::Severity::Warning: return "warning";
    case CheckDiagnostic::Severity::Error: return "error";
  }
  return "?";
}

}  // namespace

std::string CheckDiagnostic::format() const {
  std::string s;
  if (!file.empty()) {
    s = file;
    if (line > 0) s += ":" + std::to_string(line) + ":" + std::to_string(column);
    s += ": ";
  }
  return s + severity_name(severity) + ": " + message;
}

int CheckResult::errors() const {
  return static_cast<int>(std::count_if(diagnostics.begin(), diagnostics.end(), [](const CheckDiagnostic& d) {
    return d.severity == CheckDiagnostic::Severity::Error;
  }));
}

std::string CheckResult::format() const {
  std::string s;
  for (const auto& d : diagnostics) s += d.format() + "\n";
  return s;
}

CheckResult check_generated(const std::string& header_text, const CheckOptions& options) {
  // The translation unit: the header, then the schedule instantiated
  // explicitly so that the typed API's static_asserts run for every call.
  const std::string main_name = "lathe-check.cpp";
  std::string unit = "#include \"" + options.header_name + "\"\n";
  if (!options.model_namespace.empty()) {
    const std::string ns = "lathe::models::" + options.model_namespace;
    unit += "template void " + ns + "::forward<lathe::typed::Recorder>(lathe::typed::Recorder&);\n";
  }
  if (!options.extra_code.empty()) unit += options.extra_code + "\n";

  std::vector<std::string> args = {
      "lathe-check",  // argv[0]; the resource directory is given explicitly
      "-fsyntax-only",
      "-x",
      "c++",
      "-std=c++20",
      "-resource-dir=" LATHE_CLANG_RESOURCE_DIR,
      "-fno-caret-diagnostics",  // also keeps "N errors generated." off stderr
      "-fno-color-diagnostics",
  };
  for (const auto& dir : options.include_dirs) args.push_back("-I" + dir);
  args.push_back(main_name);

  // The real file system with the translation unit and the header in memory on top.
  auto overlay = llvm::makeIntrusiveRefCnt<llvm::vfs::OverlayFileSystem>(llvm::vfs::getRealFileSystem());
  auto memory = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
  overlay->pushOverlay(memory);
  memory->addFile(main_name, 0, llvm::MemoryBuffer::getMemBufferCopy(unit, main_name));
  memory->addFile(options.header_name, 0, llvm::MemoryBuffer::getMemBufferCopy(header_text, options.header_name));
  for (const auto& [name, text] : options.headers)
    memory->addFile(name, 0, llvm::MemoryBuffer::getMemBufferCopy(text, name));
  auto files = llvm::makeIntrusiveRefCnt<::clang::FileManager>(::clang::FileSystemOptions(), overlay);

  CheckResult result;
  Collector collector(result.diagnostics);
  ::clang::tooling::ToolInvocation invocation(std::move(args), std::make_unique<::clang::SyntaxOnlyAction>(),
                                              files.get());
  invocation.setDiagnosticConsumer(&collector);
  const bool ran = invocation.run();
  result.ok = ran && collector.getNumErrors() == 0;
  if (!ran && result.errors() == 0)
    result.diagnostics.push_back({CheckDiagnostic::Severity::Error, "", 0, 0, "the in-process compiler did not run"});
  return result;
}

}  // namespace lathe::clang

// Clang in process: libFormat on the generated files (`lathe gen`) and the
// in-process compile of a generated header (`lathe check`), whose failures
// must point at the spec through the header's #line directives.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "generator/clang/check.hpp"
#include "generator/clang/format.hpp"
#include "generator/emit/emit_cpp.hpp"
#include "generator/lower/model_plan.hpp"
#include "generator/spec/parse.hpp"

using namespace lathe;

namespace {

struct Generated {
  std::string header;  // formatted, as `lathe gen` writes it
  clang::CheckOptions options;
};

// The header of models/<name> as `lathe check` compiles it: #line directives
// name the spec as "models/<name>", the way the build runs the generator.
Generated generate(const std::string& name) {
  const std::string spec_path = "models/" + name;
  spec::Diagnostics diag(spec_path);
  const auto s = spec::parse_spec_file(std::string(LATHE_SOURCE_DIR) + "/" + spec_path, diag);
  REQUIRE_MESSAGE(s, diag.format());
  Generated g;
  g.options.model_namespace = emit::model_namespace(s->name);
  g.options.include_dirs = {LATHE_SOURCE_DIR};
  g.header = clang::format_cpp(emit::emit_model_header(*s, spec_path, g.options.header_name), g.options.header_name);
  return g;
}

// `text` with its one occurrence of `from` replaced by `to`.
std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "not in the generated header: " << from);
  REQUIRE_MESSAGE(text.find(from, at + 1) == std::string::npos, "more than once in the generated header: " << from);
  return text.replace(at, from.size(), to);
}

// The spec line a position of the header is attributed to: the last
// `#line N "<spec>"` before it.
int spec_line_at(const std::string& header, size_t position, const std::string& spec_path) {
  const std::string tail = " \"" + spec_path + "\"";
  int line = 0;
  for (size_t at = header.find("#line "); at != std::string::npos && at < position; at = header.find("#line ", at + 1)) {
    const size_t end = header.find('\n', at);
    const std::string directive = header.substr(at, end - at);
    if (directive.ends_with(tail)) line = std::stoi(directive.substr(6));
  }
  return line;
}

bool has(const clang::CheckResult& r, clang::CheckDiagnostic::Severity severity, const std::string& file, unsigned line,
         const std::string& text) {
  for (const auto& d : r.diagnostics)
    if (d.severity == severity && d.file == file && d.line == line && d.message.find(text) != std::string::npos)
      return true;
  return false;
}

}  // namespace

TEST_CASE("format_cpp formats in Google style at 120 columns and keeps #line directives right") {
  const std::string file = "out/model.hpp";
  const std::string code =
      "#pragma once\n"
      "namespace x {\n"
      "#line 7 \"models/x.toml\"\n"
      "inline   constexpr int a=1;\n"
      "int f(int aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, int bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, int cccccccccccccccccccccccccccccc, "
      "int dddddddddddddddd);\n"
      "#line 5 \"out/model.hpp\"\n"
      "int g();\n"
      "}\n";
  const std::string formatted = clang::format_cpp(code, file);
  CHECK(formatted ==
        "#pragma once\n"
        "namespace x {\n"
        "#line 7 \"models/x.toml\"\n"
        "inline constexpr int a = 1;\n"
        "int f(int aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, int bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, int cccccccccccccccccccccccccccccc,\n"
        "      int dddddddddddddddd);\n"
        "#line 8 \"out/model.hpp\"\n"  // renumbered: f now takes two lines
        "int g();\n"
        "}  // namespace x\n");
}

TEST_CASE("format_cpp keeps long tables as libFormat lays them out") {
  auto table = [](int rows, const std::string& text) {
    std::string code = "struct E { int a; const char* b; };\ninline constexpr E table[] = {\n";
    for (int i = 0; i < rows; ++i) code += "    {" + std::to_string(i) + ", \"" + text + "\"},\n";
    return code + "};\nint   after;\n";
  };
  // Rows too wide to share a line: kept one a line, the rest formatted.
  const std::string wide = table(40, std::string(60, 'w'));
  const std::string kept = clang::format_cpp(wide, "t.hpp");
  CHECK(kept == clang::format_cpp(wide, "t.hpp", clang::TableRows::Format));
  CHECK(kept.find("int after;\n") != std::string::npos);
  // Narrow rows: libFormat packs them into columns, and so does format_cpp.
  const std::string narrow = table(40, "row");
  CHECK(clang::format_cpp(narrow, "t.hpp") == clang::format_cpp(narrow, "t.hpp", clang::TableRows::Format));
  const std::string packed = clang::format_cpp(narrow, "t.hpp");
  CHECK(std::count(packed.begin(), packed.end(), '\n') < 20);
}

TEST_CASE("the generated headers are formatted as libFormat would, manifests included") {
  for (const std::string name : {"smollm2-135m.toml", "gpt2.toml", "qwen2.5-0.5b.toml", "llama-3-8b.toml"}) {
    CAPTURE(name);
    const std::string spec_path = "models/" + name;
    spec::Diagnostics diag(spec_path);
    const auto s = spec::parse_spec_file(std::string(LATHE_SOURCE_DIR) + "/" + spec_path, diag);
    REQUIRE_MESSAGE(s, diag.format());
    const std::string text = emit::emit_model_header(*s, spec_path, "out/model.hpp");
    const auto start = std::chrono::steady_clock::now();
    const std::string kept = clang::format_cpp(text, "out/model.hpp");
    const auto middle = std::chrono::steady_clock::now();
    const std::string full = clang::format_cpp(text, "out/model.hpp", clang::TableRows::Format);
    const auto end = std::chrono::steady_clock::now();
    CHECK(kept == full);
    CHECK(kept.find("LATHE_FORMAT_TABLE") == std::string::npos);
    MESSAGE("format_cpp " << name << ": " << std::chrono::duration<double, std::milli>(middle - start).count()
                          << " ms (manifest through libFormat too: "
                          << std::chrono::duration<double, std::milli>(end - middle).count() << " ms)");
  }
}

TEST_CASE("the generated headers of the shipped specs compile in process") {
  for (const std::string name :
       {"smollm2-135m.toml", "gpt2.toml", "qwen2.5-0.5b.toml", "tinyllama-1.1b.toml", "llama-3-8b.toml"}) {
    CAPTURE(name);
    const Generated g = generate(name);
    const auto start = std::chrono::steady_clock::now();
    const clang::CheckResult r = clang::check_generated(g.header, g.options);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    CHECK_MESSAGE(r.ok, r.format());
    CHECK(r.errors() == 0);
    MESSAGE("lathe check " << name << ": " << static_cast<int>(ms) << " ms");
  }
}

// A splice [vision] spec's header includes its tower's build (tower.hpp),
// which `lathe check` puts in memory beside it.
TEST_CASE("a vision spec's headers, the decoder's and its tower's, compile in process") {
  const std::string spec_path = "tests/specs/vision/tiny-llava-p3.toml";
  spec::Diagnostics diag(spec_path);
  const auto s = spec::parse_spec_file(std::string(LATHE_SOURCE_DIR) + "/" + spec_path, diag);
  REQUIRE_MESSAGE(s, diag.format());
  const auto tower = lower::plan_tower(*s, diag);
  REQUIRE_MESSAGE(tower, diag.format());
  clang::CheckOptions options;
  options.model_namespace = emit::model_namespace(s->name);
  options.include_dirs = {LATHE_SOURCE_DIR};
  options.headers.push_back({"tower.hpp", emit::emit_model_header(lower::tower_spec(*s), *tower, spec_path, "tower.hpp")});
  const std::string header = emit::emit_model_header(*s, spec_path, options.header_name);
  CHECK(header.find("#include \"tower.hpp\"") != std::string::npos);
  const clang::CheckResult r = clang::check_generated(header, options);
  CHECK_MESSAGE(r.ok, r.format());
  // Without it, the include fails.
  options.headers.clear();
  CHECK(!clang::check_generated(header, options).ok);
}

TEST_CASE("a broken contract in the generated header is reported at its spec line") {
  const std::string spec = "models/smollm2-135m.toml";
  Generated g = generate("smollm2-135m.toml");
  g.header = replace_once(g.header, "inline constexpr int64_t kv_heads = 3;", "inline constexpr int64_t kv_heads = 4;");
  const clang::CheckResult r = clang::check_generated(g.header, g.options);
  INFO(r.format());
  CHECK_FALSE(r.ok);
  // smollm2-135m.toml line 12: `kv_heads = 3`.
  CHECK(has(r, clang::CheckDiagnostic::Severity::Error, spec, 12, "heads is not a multiple of kv_heads"));
  CHECK(r.format().find(spec + ":12:1: error: static_assert failed") != std::string::npos);
}

TEST_CASE("the forward schedule is instantiated: the typed API's static_asserts run, at the spec") {
  const std::string spec = "models/smollm2-135m.toml";
  Generated g = generate("smollm2-135m.toml");
  // Only the schedule is wrong: 9 query heads cannot share 2 KV heads (in
  // layer 0's attention; the schedule is unrolled, one call per layer).
  const std::string call = "r.template attention<heads, kv_heads, head_dim>(";
  const size_t at = g.header.find(call);
  REQUIRE(at != std::string::npos);
  const int line = spec_line_at(g.header, at, spec);
  REQUIRE(line > 0);
  g.header.replace(at, call.size(), "r.template attention<heads, 2, head_dim>(");
  const clang::CheckResult r = clang::check_generated(g.header, g.options);
  INFO(r.format());
  CHECK_FALSE(r.ok);
  bool in_typed = false;
  for (const auto& d : r.diagnostics)
    if (d.severity == clang::CheckDiagnostic::Severity::Error && d.file.ends_with("core/typed.hpp") &&
        d.message.find("attention: heads is not a multiple of kv_heads") != std::string::npos)
      in_typed = true;
  CHECK(in_typed);
  CHECK(has(r, clang::CheckDiagnostic::Severity::Note, spec, static_cast<unsigned>(line), "requested here"));
}

TEST_CASE("extra code is compiled after the header and reported where it is") {
  Generated g = generate("smollm2-135m.toml");
  g.options.extra_code = "static_assert(lathe::models::smollm2_135m::heads == 9);\n"
                         "static_assert(lathe::models::smollm2_135m::heads == 8, \"injected\");";
  const clang::CheckResult r = clang::check_generated(g.header, g.options);
  CHECK_FALSE(r.ok);
  REQUIRE(r.diagnostics.size() == 1);
  CHECK(r.diagnostics[0].file == "lathe-check.cpp");
  CHECK(r.diagnostics[0].line == 4);  // after the #include and the explicit instantiation
  CHECK(r.diagnostics[0].message.find("\"injected\"") != std::string::npos);
}

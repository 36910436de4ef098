// libFuzzer target for the tool-call parser (runtime/serve/tool_calls.cpp),
// which reads a model's text, untrusted, back into calls. The first byte
// picks the format (Hermes, Llama 3, Mistral, none), whether several calls
// are kept, and the size of the pieces the rest is fed in; the rest is the
// text. Fed whole and fed in pieces, the output must be the same; each
// call's name must be non-empty and its arguments the compact JSON text of
// an object; an output without calls must be the text byte for byte, and
// with parallel calls off, at most one call. A crash, a sanitizer report, a
// hang, any exception or a broken promise is a finding.
//
// Seeds: tests/fuzz/corpus/tool_calls/.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz.hpp"
#include "runtime/serve/tool_calls.hpp"

using lathe::fuzz::finding;
using namespace lathe::serve;

void lathe::fuzz::tool_calls(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const ToolFormat format = static_cast<ToolFormat>(data[0] & 3);
  const bool parallel = (data[0] & 4) != 0;
  const size_t piece = 1 + (data[0] >> 3);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  const ToolCallParser::Output whole = parse_tool_calls(format, text, parallel);
  ToolCallParser parser(format, parallel);
  ToolCallParser::Output pieces;
  const auto add = [&](ToolCallParser::Output o) {
    pieces.content += o.content;
    for (ToolCall& c : o.calls) pieces.calls.push_back(std::move(c));
  };
  for (size_t at = 0; at < text.size(); at += piece) add(parser.feed(text.substr(at, piece)));
  add(parser.finish());

  if (whole.content != pieces.content || whole.calls.size() != pieces.calls.size())
    finding("fed in pieces, the output differs from the whole text's");
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    const ToolCall& c = whole.calls[i];
    if (c.name != pieces.calls[i].name || c.arguments != pieces.calls[i].arguments)
      finding("fed in pieces, a call differs from the whole text's");
    if (c.name.empty()) finding("a call without a name");
    const std::optional<nlohmann::ordered_json> arguments = bounded_json(c.arguments);
    if (!arguments || !arguments->is_object()) finding("a call's arguments are not a JSON object");
    if (arguments->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) != c.arguments)
      finding("a call's arguments are not compact JSON text");
  }
  if (whole.calls.empty() && whole.content != text) finding("an answer without calls that is not the text");
  if (!parallel && whole.calls.size() > 1) finding("several calls with parallel calls off");
  if (format == ToolFormat::None && !whole.calls.empty()) finding("calls read without a format");
}

LATHE_FUZZ_TARGET(lathe::fuzz::tool_calls)

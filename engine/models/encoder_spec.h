// EncoderSpec: which encoder, with which options, as the string stored in weights files and
// cache manifests: "NAME[:OPTION=INTEGER,...]", e.g. "resnet18:width=16,in_channels=1". An
// encoder loaded from a file (torchscript) names it first, with the XXH3-128 of its bytes once
// resolved: "torchscript:/abs/model.ts,xxh3=HEX,in_channels=1,height=28,width=28". The
// registry (encoder_registry.h) knows the names and options; this is only the value and its
// syntax. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace recycle {

struct EncoderSpec {
  std::string name;
  std::string file;    // the file the encoder is loaded from; "" for built-in encoders
  std::string digest;  // XXH3-128 hex of the file's bytes; "" when not (yet) known
  std::vector<std::pair<std::string, int64_t>> options;  // in the order they are printed

  // "NAME" or "NAME:a=1,b=2".
  std::string to_string() const;
  bool has(const std::string& option) const;
  // The option's value; throws std::invalid_argument when the spec has no such option.
  int64_t get(const std::string& option) const;
  // Sets an option the spec has; throws std::invalid_argument naming the spec otherwise.
  void set(const std::string& option, int64_t value);

  // Parses the syntax only (a name, then an optional file as the first item, an optional
  // xxh3=HEX item, then name=integer items); what the names mean is the registry's to check.
  // Throws std::invalid_argument naming what is wrong.
  static EncoderSpec parse(const std::string& text);
  friend bool operator==(const EncoderSpec& a, const EncoderSpec& b) {
    return a.name == b.name && a.file == b.file && a.digest == b.digest && a.options == b.options;
  }
};

}  // namespace recycle

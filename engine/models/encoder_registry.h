// The encoder registry: spec string -> encoder, in the style of the keyer registry
// (recycle/keyer.h). Each entry names an architecture, the kind of input it takes and
// its integer options with defaults and ranges; ResNet-18 (engine/models/resnet18.h) and the
// text transformer (engine/models/transformer.h) are entries.
// No LibTorch in this header: BlockModel is only declared.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/models/encoder_spec.h"

namespace recycle {

struct BlockModel;

struct EncoderOption {
  std::string name;
  int64_t default_value = 0;
  int64_t min = 1;
  int64_t max = 4096;
  std::string help;
};

// The data an encoder reads.
enum class EncoderInput { kImage, kText };
std::string input_name(EncoderInput input);  // "image" or "text"

struct EncoderInfo {
  std::string name;
  EncoderInput input = EncoderInput::kImage;  // the data it reads
  std::vector<EncoderOption> options;  // printed in this order in canonical specs
  std::string help;
  // Loaded from a file named in the spec ("torchscript:FILE"); its resolved spec holds the
  // file's absolute path and the XXH3-128 of its bytes.
  bool takes_file = false;
};

// The registered encoder names, sorted.
std::vector<std::string> encoder_names();
// The registry's first encoder (resnet18).
std::string default_encoder_name();
// The name recycle-build and recycle-train use when --model is not given, for data of this
// kind ("image": resnet18, "text": transformer); throws std::invalid_argument for another kind.
std::string default_encoder_for(EncoderInput input);
// The entry for `name`; throws std::invalid_argument naming the known encoders.
const EncoderInfo& encoder_info(const std::string& name);

// Parses a spec and completes it: options not given take their defaults, unknown encoders or
// options and values out of range throw std::invalid_argument naming them. to_string() of the
// result is canonical ("resnet18" -> "resnet18:width=16,in_channels=1") and round-trips.
EncoderSpec resolve_encoder_spec(const std::string& text);

// The input-shape options of an image model loaded from a file (torchscript, pt2), in this
// order: in_channels, in_height, in_width, each set from the data.
std::vector<EncoderOption> input_shape_options();

// True when `spec` parses and names an encoder loaded from a program file (torchscript:FILE,
// pt2:FILE); false for a built-in encoder or a spec that does not parse.
bool loads_a_program(const std::string& spec);

// The spec to make an encoder from when `stored` comes from data a user did not write as a
// program (a cache's manifest, a weights file; `whose` names it: "cache DIR"): a model loaded from
// a file (torchscript:FILE) is a program, so it is loaded only from the file the user gave
// (`given`, their --model), never from the path `stored` names. Returns `stored` for other
// models (and for a spec that does not parse, for make_encoder to refuse). Throws
// InvalidArgument (recycle/errors.h) when no file is given, and StaleCacheError when the given
// file's XXH3-128 (or kind) is not the stored one; reads only the given file.
std::string spec_with_given_file(const std::string& stored, const std::string& given,
                                 const std::string& whose);

// A randomly initialised encoder (or one loaded from the spec's file) with a classifier of
// `classes` outputs (initialisation drawn from torch's global generator). model.spec is the
// canonical spec. Throws std::invalid_argument for a bad spec or classes < 1.
BlockModel make_encoder(const std::string& spec, int64_t classes);

}  // namespace recycle

// --transform SPEC: how a decoded image file becomes the encoder's input, with torchvision's
// semantics, in this order: channel conversion, resize, center crop; normalisation is applied
// later, by image_batch (engine/models/preprocess.h), on the uint8 result that the keyer hashes.
//
//   gray | rgb        channels: gray is ITU-R 601 luma, round(0.299 R + 0.587 G + 0.114 B) (as
//                     PIL's convert("L"), which torchvision's Grayscale uses); rgb repeats gray.
//                     Default: the encoder's in_channels when its spec fixes them (a
//                     weights file's), else 1 channel (gray), the encoders' default.
//   resize=S          the shorter side to S, the longer to floor(S * long / short) (as
//                     transforms.Resize(S)); bilinear with antialias: a triangle filter,
//                     widened by the scale factor when shrinking (as PIL and
//                     transforms.Resize(antialias=True)). Default: the encoder's input size
//                     when its spec fixes a square one (in_height = in_width = S, as
//                     TorchScript encoders' do): resize=S,center-crop=S; else the size as
//                     stored.
//   center-crop=S     the S x S center (as transforms.CenterCrop(S): top = round((H - S) / 2));
//                     zero padding where the image is smaller. Default: none.
//   normalize=M/D     per channel mean and std of pixels/255, ':' between channels, one value
//                     for all (normalize=0.485:0.456:0.406/0.229:0.224:0.225). Default: the
//                     built-in normalisation (Fashion-MNIST's mean 0.2860, std 0.3530).
//
// Ops are comma-separated, each at most once, in any order (they apply in the order above).
// Without resize and center-crop every file of a split must have the size of the first.
// spec() is canonical: equal transforms give equal specs; it is part of a cache's identity.
// No LibTorch here; thread safe (a value type).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace recycle {

struct ImageTransform {
  int64_t channels = 1;  // 1 or 3
  int64_t resize = 0;    // shorter side; 0 keeps the size
  int64_t crop = 0;      // center crop side; 0 none
  std::vector<float> mean, std;  // empty: the built-in normalisation; else 1 or `channels` values

  // Parses a spec; "" is the default. `encoder_input` is the encoder's input [C, H, W] as far
  // as its spec fixes it (DatasetOptions::encoder_input; empty or 0: any), which gives the
  // defaults of the channels and the size above. Throws std::invalid_argument with one line
  // naming the op.
  static ImageTransform parse(const std::string& spec,
                              const std::vector<int64_t>& encoder_input = {});
  // The canonical spec: "gray", "rgb,resize=32,center-crop=28,normalize=0.5/0.25".
  std::string spec() const;
  bool has_size() const { return crop > 0; }  // the output size is known without a file

  // The output height and width for an image of height h and width w.
  void output_size(int64_t h, int64_t w, int64_t* oh, int64_t* ow) const;
  // Converts one decoded image (uint8, h x w x c interleaved, c = 1 or 3) into out: uint8
  // [channels, oh, ow] (planar), with oh, ow from output_size.
  void apply(const uint8_t* pixels, int64_t h, int64_t w, int64_t c, uint8_t* out) const;
};

// Resizes a planar uint8 image [c, h, w] to [c, oh, ow] with the antialiased bilinear filter
// described above, in PIL's fixed-point arithmetic (its bytes exactly: ImageTransform.
// ResizeMatchesPil). Exposed for tests and for augment.h's resized-crop.
void resize_bilinear_antialias(const uint8_t* in, int64_t c, int64_t h, int64_t w, uint8_t* out,
                               int64_t oh, int64_t ow);

}  // namespace recycle

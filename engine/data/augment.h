// Augmentation: random changes of an image that make another view of the same sample
// (`--augment SPEC`; docs/augmentation.md). A spec is a comma-separated list of ops, applied in
// the order given, each with torchvision's semantics where it has one:
//
//   hflip            mirror left-right with probability 1/2 (RandomHorizontalFlip)
//   crop=P           pad P pixels of 0 on every side, then cut a random H x W window
//                    (RandomCrop(size, padding=P)); 1 <= P <= 64 and 2P <= min(H, W)
//   resized-crop=S   a random window of S..1 of the area and aspect ratio 3/4..4/3, resized back
//                    to H x W, bilinear with antialias (RandomResizedCrop(size, scale=(S, 1)));
//                    0 < S < 1
//   rotate=D         rotate by a random angle in [-D, D] degrees about the centre, nearest
//                    pixel, 0 outside (RandomRotation(D)); 0 < D <= 180
//   jitter=B         brightness then contrast, each by a random factor in [max(0, 1-B), 1+B]
//                    (ColorJitter(brightness=B, contrast=B), with the order fixed); 0 < B <= 1
//
// Ops act on uint8 pixels [C, H, W] after the --transform (image folders) or as stored (IDX,
// npy of uint8), before normalisation. All randomness comes from one 64-bit seed through
// splitmix64 and exact integer and double arithmetic, so a seed gives the same bytes on every
// machine (no std:: distributions, whose results differ between standard libraries).
// No LibTorch; an Augment is immutable after parse and thread safe to apply.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace recycle {

class Augment {
 public:
  enum class Op { kHflip, kCrop, kResizedCrop, kRotate, kJitter };
  struct Step {
    Op op;
    double value = 0;  // P, S, D or B; 0 for hflip
  };

  // Parses a spec; "" is no augmentation. Throws std::invalid_argument with one line naming
  // the op and its range.
  static Augment parse(const std::string& spec);
  // The canonical spec ("hflip,crop=4,rotate=10"): what the manifest stores and the view keys
  // hash. parse(spec()).spec() == spec().
  std::string spec() const;
  bool empty() const { return steps_.empty(); }
  const std::vector<Step>& steps() const { return steps_; }

  // Applies the ops to one image (uint8 [c, h, w], row-major) in place, its random draws made
  // from `seed`. The same seed and image give the same bytes.
  void apply(uint8_t* pixels, int64_t c, int64_t h, int64_t w, uint64_t seed) const;

  // Throws std::invalid_argument (one line) when an op does not fit images of h x w: crop=P
  // must keep at least half of the rows and columns (2P <= min(h, w)); a larger P makes views
  // that are mostly or wholly padding.
  void check_image(int64_t h, int64_t w) const;

 private:
  std::vector<Step> steps_;
};

// The view a sample at `position` reads in `epoch` of a split with `views` views: views
// consecutive epochs read each of its views once, in an order that differs from sample to
// sample (an offset drawn from `seed` and the position). 0 <= result < views.
int64_t epoch_view(uint64_t seed, int64_t position, int64_t epoch, int64_t views);

}  // namespace recycle

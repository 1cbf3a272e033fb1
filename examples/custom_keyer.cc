// A keyer defined outside the library and registered with it: "center:N" keys an image by its
// centre only, ignoring a border of N pixels, so images that differ only at the border share
// one cache record. The build then uses it like a built-in keyer, by its spec, and stores the
// spec in the cache's identity.
//
// Usage: custom_keyer WORK_DIR
#include <recycle/build.h>
#include <recycle/keyer.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>

namespace {

class CenterKeyer final : public recycle::Keyer {
 public:
  explicit CenterKeyer(int64_t border) : border_(border) {}
  std::string spec() const override { return "center:" + std::to_string(border_); }

  // The input is an image [C, H, W]; the key hashes the view [C, H-2N, W-2N] that starts N
  // rows and columns in (the hasher follows the strides, nothing is copied).
  recycle::Key key(const recycle::KeyInput& input) const override {
    if (input.tensor == nullptr || input.tensor->shape.size() != 3) {
      throw std::invalid_argument("keyer center needs images [C, H, W]");
    }
    recycle::TensorView crop = *input.tensor;
    if (crop.shape[1] <= 2 * border_ || crop.shape[2] <= 2 * border_) {
      throw std::invalid_argument("keyer " + spec() + ": the image is smaller than its border");
    }
    crop.shape[1] -= 2 * border_;
    crop.shape[2] -= 2 * border_;
    const int64_t offset = border_ * (crop.strides[1] + crop.strides[2]);
    crop.data = static_cast<const char*>(crop.data) + offset * static_cast<int64_t>(crop.element_size);
    recycle::ContentHasher hasher;
    hasher.update_tensor(crop);
    return hasher.digest();
  }

 private:
  int64_t border_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: custom_keyer WORK_DIR\n");
    return 2;
  }
  try {
    recycle::register_keyer("center", [](const std::string& options) {
      const int64_t border = options.empty() ? 2 : std::stoll(options);
      if (border < 0 || border > 13) throw std::invalid_argument("border must be 0..13");
      return std::unique_ptr<recycle::Keyer>(new CenterKeyer(border));
    });

    // Two images that differ only in their border pixel get one key.
    uint8_t a[1 * 4 * 4] = {0}, b[1 * 4 * 4] = {0};
    b[0] = 255;
    recycle::TensorView va{"uint8", {1, 4, 4}, {16, 4, 1}, a, 1}, vb = va;
    vb.data = b;
    const auto keyer = recycle::make_keyer("center:1");
    recycle::KeyInput ia, ib;
    ia.tensor = &va;
    ib.tensor = &vb;
    std::printf("border-only difference, same key: %s\n",
                keyer->key(ia) == keyer->key(ib) ? "yes" : "no");

    // A build with it, then a rerun that finds everything cached.
    recycle::BuildOptions build;
    build.data = {"fashion-mnist", "test", "", 200};
    build.keyer = "center:4";
    build.recycle = 0.25;
    build.model.width = 8;
    build.cache_dir = std::string(argv[1]) + "/cache";
    build.progress = false;
    for (int run = 1; run <= 2; ++run) {
      const recycle::BuildReport r = recycle::run_build(build);
      std::printf("build %d with keyer center:4: %lld samples, %lld unique, %lld computed\n", run,
                  static_cast<long long>(r.samples), static_cast<long long>(r.unique),
                  static_cast<long long>(r.computed));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_keyer: %s\n", e.what());
    return 1;
  }
}

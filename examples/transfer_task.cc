// The transfer task in a page, through the library rather than the command line: pretrain a
// ResNet-18 on Fashion-MNIST classes 0-4, cache the first half of its blocks for classes 5-9,
// and train the head from the cache.
//
// Usage: transfer_task WORK_DIR [SAMPLES]   (SAMPLES per task and split; default 2000)
#include <recycle/build.h>
#include <recycle/train.h>

#include <cstdio>
#include <exception>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: transfer_task WORK_DIR [SAMPLES]\n");
    return 2;
  }
  const std::string work = argv[1];
  const int64_t samples = argc > 2 ? std::stoll(argv[2]) : 2000;
  try {
    // 1. Pretrain the whole encoder on classes 0-4 (full training from raw data).
    recycle::TrainOptions pretrain;
    pretrain.data = {"fashion-mnist", "train", "0-4", samples};
    pretrain.recycle = 0;
    pretrain.eval_split = "none";
    pretrain.hyper.epochs = 1;
    pretrain.save_model = work + "/encoder.pt";
    pretrain.progress = false;
    recycle::run_train(pretrain);

    // 2. Cache the frozen first half for classes 5-9: both splits, one cache.
    for (const char* split : {"train", "test"}) {
      recycle::BuildOptions build;
      build.data = {"fashion-mnist", split, "5-9", samples};
      build.model.weights = pretrain.save_model;
      build.recycle = 0.5;
      build.cache_dir = work + "/cache";
      build.progress = false;
      const recycle::BuildReport b = recycle::run_build(build);
      std::printf("cached %s: %lld samples, %lld records computed\n", split,
                  static_cast<long long>(b.samples), static_cast<long long>(b.computed));
    }

    // 3. Train the head (the other half and a new classifier) from the cache.
    recycle::TrainOptions head;
    head.cache_dir = work + "/cache";
    head.hyper.epochs = 2;
    head.progress = false;
    const recycle::TrainReport r = recycle::run_train(head);
    std::printf("head from the cache: test accuracy %.4f on %lld samples\n", r.test_acc,
                static_cast<long long>(r.test_samples));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "transfer_task: %s\n", e.what());
    return 1;
  }
}

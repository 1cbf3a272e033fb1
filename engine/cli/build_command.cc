// recycle-build's command line.
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "cache/codec.h"
#include "engine/cli/cli_common.h"
#include "engine/cli/commands.h"
#include "engine/data/augment.h"
#include "engine/distributed/dist_options.h"  // check_sharded_cache
#include "engine/precompute/build_pipeline.h"
#include "recycle/keyer.h"

namespace recycle {

namespace {

// What the cache buys, before any training: the prefix's measured share of the forward and
// the epoch speedups it implies (build.h says how).
void print_expected_speedup(const BuildReport& r) {
  std::ostringstream line;
  line.setf(std::ios::fixed);
  line.precision(0);
  line << "prefix: " << 100 * r.prefix_share << "% of the model's forward time (measured); ";
  line.precision(2);
  line << "expected epoch speedup from the cache: about " << r.expected_speedup_vs_full()
       << "x against full fine-tuning, " << r.expected_speedup_vs_online()
       << "x against running the frozen prefix every epoch (a backward of two forwards, the "
          "cache's reads not counted)";
  std::cout << line.str() << std::endl;
}

}  // namespace

int build_main(int argc, char** argv) {
  BuildOptions o;
  DistOptions dist;
  bool json = false;
  CLI::App app("Runs a model's frozen prefix once per distinct sample and stores its outputs in "
               "a content-addressed activation cache.",
               "recycle-build");
  add_data_flags(app, &o.data);
  app.get_option("--data")->required();
  add_model_flags(app, &o.model);
  add_split_flags(app, &o.recycle, &o.split_at);
  app.add_option("--keyer", o.keyer,
                 "keyer spec (known: " + join(keyer_names(), ", ") + "; text takes :space,lower; "
                 "default: " + default_keyer_spec(false) + " for images, " +
                     default_keyer_spec(true) + " for text)");
  add_enum_option(app, "--codec", &o.codec, codec_names(), parse_codec, codec_name(o.codec),
                  "how records store activations");
  add_enum_option(app, "--compression", &o.compression, compression_names(), parse_compression,
                  compression_name(o.compression),
                  "RocksDB's compression of the records this run writes (readers need no flag; "
                  "lz4 saved 11-20% of float records' bytes, and cost the build about 18%)");
  add_cache_flag(app, &o.cache_dir, "cache directory (created when missing; links are followed)")
      ->required();
  app.add_option("--augment", o.augment,
                 "with --views K: store K augmented views of every sample instead of the sample "
                 "(ops applied in order: hflip, crop=P, resized-crop=S, rotate=D, jitter=B; "
                 "e.g. hflip,crop=4; docs/augmentation.md)");
  // The bounds are BuildOptions::validate()'s; --views 0, the library's "no views", is not typed.
  app.add_option("--views", o.views,
                 "augmented views stored per sample (with --augment), " +
                     range_text(int64_t{1}, kMaxViews))
      ->check(kOneOrMore);
  app.add_option("--batch", o.batch,
                 "samples per prefix forward and write batch, " + range_text(int64_t{1}, kMaxBatch))
      ->capture_default_str();
  app.add_option("--threads", o.threads,
                 "threads, " + range_text(0, kMaxThreads) + " (0 = every core)")
      ->capture_default_str();
  add_seed_flag(app, &o.model.seed, "initialisation seed when there are no --weights");
  app.add_flag("--rebuild", o.rebuild, "delete the cache in --cache first and start over");
  app.add_option("--device", o.device, "cpu, cuda or cuda:N: where the prefix runs")
      ->capture_default_str();
  add_enum_option(app, "--precision", &o.precision, precision_names(), parse_precision,
                  precision_name(o.precision),
                  "arithmetic of the prefix's forward: fp32, or bf16 / fp16 under LibTorch's "
                  "autocast (part of the cache's identity; the records are stored by --codec)");
  add_dist_flags(app, &dist);
  app.add_flag("--sharded", dist.sharded,
               "every rank builds its own shard of the split into its own --cache, which no "
               "other rank opens (a path on its own machine; with --nproc put {rank} in it); "
               "docs/scale.md");
  app.add_flag("--json", json, "print one JSON object as the last line of stdout");
  return run_tool(app, argc, argv, [&] {
    o.validate();
    check_sharded_cache(dist, o.cache_dir);
    const int launched = launch_if_asked(app, argc, argv, dist, o.threads);
    if (launched >= 0) return launched;
    dist.store_hosted_elsewhere = std::getenv("RECYCLE_LAUNCHED") != nullptr;
    o.progress = !json;
    const BuildReport r = run_build(o, dist);
    std::cout << "split " << r.split << ": " << r.samples << " samples, " << r.unique << " unique"
              << (r.views > 0 ? ", " + std::to_string(r.views) + " views each" : std::string())
              << ", " << r.computed << " computed"
              << (r.ranks > 1 ? " by " + std::to_string(r.ranks) + " processes" : std::string())
              << (r.shards > 0 ? " into " + std::to_string(r.shards) + " shards" : std::string())
              << ", " << r.skipped << " already cached; " << r.bytes << " bytes written in "
              << r.seconds << " s (" << r.samples_per_s << " samples/s); cache holds "
              << r.cache_records << " records" << std::endl;
    if (r.prefix_share >= 0) print_expected_speedup(r);
    if (json) std::cout << json_with_omp_wait(r.to_json()) << std::endl;
    return 0;
  });
}

}  // namespace recycle

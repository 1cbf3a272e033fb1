// recycle-predict's command line.
#include <iostream>
#include <string>

#include "engine/cli/cli_common.h"
#include "engine/cli/commands.h"
#include "recycle/predict.h"

namespace recycle {

int predict_main(int argc, char** argv) {
  PredictOptions o;
  bool json = false;
  CLI::App app("Predicts with a trained head (recycle-train --save-head): a sample whose key is "
               "in the cache runs the head on its stored activation, any other runs the prefix "
               "of --weights, then the head. Writes one row per sample to --out.",
               "recycle-predict");
  add_cache_flag(app, &o.cache_dir, "activation cache the head was trained from")->required();
  app.add_option("--head", o.head,
                 "head file written by recycle-train --save-head, or a compiled head FILE.pt2 "
                 "(recycle.export(head, example, FILE, cache=DIR); torch >= 2.6 builds)")
      ->check(kNotEmpty)
      ->required();
  app.add_option("--weights", o.weights,
                 "the weights the cache was built from (recycle-build --weights; the file the "
                 "cache records is named when this is missing, never opened); other weights are "
                 "refused as stale")
      ->check(kNotEmpty);
  app.add_option("--model", o.model,
                 "torchscript:FILE or pt2:FILE: the program the cache's prefix was loaded from "
                 "(with --weights of such a model, the one they were saved from; a file the "
                 "cache or the weights name is never opened)")
      ->check(kNotEmpty);
  add_data_flags(app, &o.data);
  app.add_option("--out", o.out,
                 "FILE.jsonl or FILE.csv: one row per sample (row, id, label, pred, class, hit, "
                 "probabilities); replaced only when complete")
      ->check(kNotEmpty)
      ->required();
  app.add_option("--top-k", o.top_k, "write the K most probable classes (0 = every class)")
      ->check(kZeroOrMore)
      ->capture_default_str();
  app.add_flag("--write-back", o.write_back,
               "store the activations of misses in the cache, so the next call hits (needs "
               "the cache's writer lock)");
  app.add_flag("--compare-full", o.compare_full,
               "also run the full model (no cache) over the same samples and report its time "
               "and the agreement (benchmarks)");
  app.add_option("--batch", o.batch,
                 "samples per chunk (keyed, looked up and predicted together), " +
                     range_text(int64_t{1}, kMaxBatch))
      ->check(kOneOrMore)
      ->capture_default_str();
  app.add_option("--threads", o.threads,
                 "threads, " + range_text(0, kMaxThreads) + " (0 = every core)")
      ->check(kZeroOrMore)
      ->capture_default_str();
  app.add_option("--device", o.device, "LibTorch device")->capture_default_str();
  app.add_flag("--json", json, "print one JSON object as the last line of stdout");
  return run_tool(app, argc, argv, [&] {
    o.progress = !json;
    const PredictReport r = run_predict(o);
    std::cout << "predicted " << r.samples << " samples: " << r.hits << " hits, " << r.misses
              << " misses";
    if (r.written_back > 0) std::cout << " (" << r.written_back << " records written back)";
    if (r.accuracy >= 0) std::cout << ", accuracy " << r.accuracy;
    std::cout << ", " << r.samples_per_s << " samples/s -> " << r.out << std::endl;
    if (o.compare_full) {
      std::cout << "full model: " << r.full_seconds << " s (cached path " << r.predict_seconds
                << " s), same class for " << r.agree << " of " << r.samples
                << ", largest probability difference " << r.max_prob_diff << std::endl;
    }
    if (json) std::cout << json_with_omp_wait(r.to_json()) << std::endl;
    return 0;
  });
}

}  // namespace recycle

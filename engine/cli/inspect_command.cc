// recycle-inspect's command line.
#include <algorithm>
#include <iostream>
#include <string>

#include "engine/cli/cli_common.h"
#include "engine/cli/commands.h"
#include "recycle/cache.h"
#include "recycle/errors.h"

namespace recycle {

int inspect_main(int argc, char** argv) {
  std::string dir, old_file, to, model;
  bool verify = false, compact = false, json = false, convert_head = false;
  CLI::App app("Shows an activation cache's manifest, counts and bytes; --verify reads and "
               "checks every record.",
               "recycle-inspect");
  // --cache is required but with --convert-old FILE (a file alone, no cache).
  const bool file_alone = std::any_of(argv + 1, argv + argc, [](const char* a) {
    const std::string arg = a;
    return arg == "--convert-old" || arg.rfind("--convert-old=", 0) == 0;
  });
  auto* cache = add_cache_flag(app, &dir, "cache directory");
  if (!file_alone) cache->required();
  app.add_option("--convert-old", old_file,
                 "a weights or head file of an older recycle (a TorchScript archive, which "
                 "loading runs: only a file you trust), written as a tensor file to --to")
      ->check(kNotEmpty);
  app.add_option("--to", to, "where --convert-old writes the converted file")->check(kNotEmpty);
  app.add_flag("--convert-old-head", convert_head,
               "rewrite the head --cache stores in an older recycle's format (which loading "
               "runs: only a cache you trust) as a tensor file");
  app.add_option("--model", model, "torchscript:FILE, the program a file or cache to convert "
                                    "was made from (a path they name is never opened)")
      ->check(kNotEmpty);
  app.add_flag("--verify", verify, "read every record and check its header, checksum and shape, "
                                   "and count orphan records exactly");
  app.add_flag("--compact", compact, "delete the records no split points to (orphans), then "
                                     "inspect; needs the cache's writer lock");
  app.add_flag("--json", json, "print one JSON object as the last line of stdout");
  return run_tool(app, argc, argv, [&] {
    if (!old_file.empty()) {
      const std::string kind = convert_old_file(old_file, to, model);
      std::cout << "converted " << kind << " " << old_file << " to " << to << std::endl;
      if (dir.empty()) return 0;
    }
    if (dir.empty()) throw InvalidArgument("--cache DIR is required (see --help)");
    if (convert_head) {
      convert_old_cache_head(dir, model);
      std::cout << "converted the head cache " << dir << " stores" << std::endl;
    }
    if (compact) {
      const CompactReport c = compact_cache(dir);
      std::cout << "compacted: " << c.removed << " orphan records deleted (" << c.removed_bytes
                << " bytes), " << c.records << " records left" << std::endl;
    }
    const InspectReport r = inspect_cache(dir, verify);
    std::cout << r.to_text();
    if (json) std::cout << r.to_json() << std::endl;
    if (!r.ok()) {
      std::cerr << "recycle-inspect: error: " << r.problems.size() << " problems in " << dir
                << ", first: " << r.problems[0] << (r.repair.empty() ? "" : "; " + r.repair)
                << std::endl;
      return 1;
    }
    return 0;
  });
}

}  // namespace recycle

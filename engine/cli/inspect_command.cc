// recycle-inspect's command line.
#include <iostream>

#include "engine/cli/cli_common.h"
#include "engine/cli/commands.h"
#include "recycle/cache.h"

namespace recycle {

int inspect_main(int argc, char** argv) {
  std::string dir;
  bool verify = false, compact = false, json = false;
  CLI::App app("Shows an activation cache's manifest, counts and bytes; --verify reads and "
               "checks every record.",
               "recycle-inspect");
  add_cache_flag(app, &dir, "cache directory")->required();
  app.add_flag("--verify", verify, "read every record and check its header, checksum and shape, "
                                   "and count orphan records exactly");
  app.add_flag("--compact", compact, "delete the records no split points to (orphans), then "
                                     "inspect; needs the cache's writer lock");
  app.add_flag("--json", json, "print one JSON object as the last line of stdout");
  return run_tool(app, argc, argv, [&] {
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
                << ", first: " << r.problems[0] << std::endl;
      return 1;
    }
    return 0;
  });
}

}  // namespace recycle

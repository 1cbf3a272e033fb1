// recycle-inspect's command line.
#include <iostream>

#include "engine/cli_common.h"
#include "engine/commands.h"
#include "engine/inspect.h"

namespace recycle {

int inspect_main(int argc, char** argv) {
  std::string dir;
  bool verify = false, json = false;
  CLI::App app("Shows an activation cache's manifest, counts and bytes; --verify reads and "
               "checks every record.",
               "recycle-inspect");
  app.add_option("--cache", dir, "cache directory")->required();
  app.add_flag("--verify", verify, "read every record and check its header, checksum and shape");
  app.add_flag("--json", json, "print one JSON object as the last line of stdout");
  return run_tool(app, argc, argv, [&] {
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

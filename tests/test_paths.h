// Where the tests find the built tools and the sources. Defined in the file CMake generates from
// tests/test_paths.cc.in, the one test file that holds a path of this clone and this build: as
// compile definitions in every test file they made each file's compile differ from clone to
// clone, so a fresh clone found none of them in the compiler cache.
#pragma once

namespace recycle::testing {

extern const char* const kBuiltToolsDir;  // the build directory (tool_path: RECYCLE_TOOLS_DIR wins)
extern const char* const kSourceDir;      // the repository's root

}  // namespace recycle::testing

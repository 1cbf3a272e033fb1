// The command-line front ends of the tools, as library functions so tests drive the same code
// the binaries run. Each returns the process exit code: 0 success, 1 failure, 2 bad usage.
// Errors print one line on stderr; with --json the last line of stdout is one JSON object.
#pragma once

namespace recycle {

int build_main(int argc, char** argv);    // recycle-build
int train_main(int argc, char** argv);    // recycle-train
int inspect_main(int argc, char** argv);  // recycle-inspect
int corpus_main(int argc, char** argv);   // recycle-corpus
int predict_main(int argc, char** argv);  // recycle-predict
int reshard_main(int argc, char** argv);  // recycle-reshard

}  // namespace recycle

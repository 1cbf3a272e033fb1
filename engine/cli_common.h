// Shared command-line plumbing: CLI11 parsing with one-line errors, and the dataset and model
// flags that recycle-build and recycle-train both take.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "engine/build_pipeline.h"
#include "engine/dataset.h"

namespace recycle {

// Parses argv into `app`, then runs `body`. --help prints to stdout and exits 0; a usage error
// prints "TOOL: ... (see --help)" and returns 2; an exception from body prints "TOOL: error: ..."
// and returns 1.
int run_tool(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

// --data, --split, --classes, --limit
void add_data_flags(CLI::App& app, DatasetOptions* data);
// --model, --width, --weights
void add_model_flags(CLI::App& app, ModelOptions* model);
// --recycle (0..1) and --split-at; returns the --recycle option.
CLI::Option* add_split_flags(CLI::App& app, double* recycle, std::string* split_at);

}  // namespace recycle

#include "engine/cli/commands.h"

int main(int argc, char** argv) { return recycle::corpus_main(argc, argv); }

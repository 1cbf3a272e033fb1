#include "engine/cli/commands.h"

int main(int argc, char** argv) { return recycle::build_main(argc, argv); }

#include "engine/cli/commands.h"

int main(int argc, char** argv) { return recycle::inspect_main(argc, argv); }

#include "engine/cli/commands.h"

int main(int argc, char** argv) { return recycle::train_main(argc, argv); }

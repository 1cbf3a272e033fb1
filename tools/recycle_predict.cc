#include "engine/cli/commands.h"

int main(int argc, char** argv) { return recycle::predict_main(argc, argv); }

#!/usr/bin/env bash
# Prints ON when Debian's /usr/bin/python3 can build and run the Python package recycle (it
# imports torch and pybind11; scripts/setup.sh installs both), else OFF. Used by scripts/test.sh
# and scripts/demo.sh for -DRECYCLE_BUILD_PYTHON.
if /usr/bin/python3 -c "import torch, pybind11" >/dev/null 2>&1; then echo ON; else echo OFF; fi

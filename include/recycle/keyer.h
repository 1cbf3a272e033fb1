// Keyers: what identifies a sample in a cache (its 128-bit key), and how to add one. A Keyer
// (keyers/keyer.h) turns a sample's input (KeyInput: its pixels as a TensorView, its text, its
// id) into a Key; ContentHasher hashes tensors and bytes. register_keyer(name, factory) makes
// "name[:options]" a keyer spec that BuildOptions::keyer (options.h) and make_keyer accept; the
// spec is stored in the cache's identity. examples/custom_keyer.cc defines and registers one.
#pragma once

#include "keyers/content_hasher.h"  // TensorView, ContentHasher, hash128
#include "keyers/key.h"             // Key
#include "keyers/keyer.h"           // KeyInput, Keyer
#include "keyers/keyer_registry.h"  // make_keyer, register_keyer, keyer_names

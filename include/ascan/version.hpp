// ascan/version.hpp: the library's version, as macros a user can test in the preprocessor.
//
// Kept equal to project(VERSION) in the top-level CMakeLists.txt, which refuses to configure
// when they differ. ASCAN_VERSION orders versions: major * 10000 + minor * 100 + patch.
#pragma once

#define ASCAN_VERSION_MAJOR 0
#define ASCAN_VERSION_MINOR 1
#define ASCAN_VERSION_PATCH 0
#define ASCAN_VERSION \
  (ASCAN_VERSION_MAJOR * 10000 + ASCAN_VERSION_MINOR * 100 + ASCAN_VERSION_PATCH)

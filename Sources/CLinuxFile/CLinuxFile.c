// Everything is in include/CLinuxFile.h (static inline); SwiftPM needs a source file for a C target.
#include "CLinuxFile.h"

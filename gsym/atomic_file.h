// Transitional: write_file_atomically lives in gsym/file_io.h.
#pragma once
#include "gsym/file_io.h"

// fp8kit/parallel: the process-wide thread pool shared by every reader and command.
#pragma once

#include "fp8kit/parallel/pool.hpp"

// core/ is the bottom layer.
#include "kernels/kernels.h"

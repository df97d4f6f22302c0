// The CPU kernels' insides are the kernels layer's own.
#include "kernels/cpu/cpu_kernels.h"

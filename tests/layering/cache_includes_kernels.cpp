// cache/ stores rows in the quant layer's formats: it sees no kernels.
#include "kernels/kernels.h"

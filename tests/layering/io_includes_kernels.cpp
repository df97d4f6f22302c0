// io/ reads and writes files in the quant layer's formats: it sees no kernels.
#include "kernels/kernels.h"

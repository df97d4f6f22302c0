// kernels/ knows nothing of models.
#include "model/config.h"

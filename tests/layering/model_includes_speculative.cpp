// model/ is below speculative/: the forward pass knows nothing of drafts.
#include "speculative/drafter.h"

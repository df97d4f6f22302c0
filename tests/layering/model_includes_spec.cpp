// model/ is below spec/: the forward pass knows nothing of drafts.
#include "spec/drafter.h"

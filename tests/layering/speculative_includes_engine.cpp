// speculative/ is below engine/: drafters see requests only through DraftContext.
#include "engine/sequence.h"

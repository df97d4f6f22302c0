// Control: speculative/ may use the model layer.
#include "model/transformer.h"
#include "speculative/drafter.h"
int layering_control() { return sizeof(tandem::ForwardBatch) > 0; }

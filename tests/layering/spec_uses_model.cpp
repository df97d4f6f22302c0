// Control: spec/ may use the model layer.
#include "model/transformer.h"
#include "spec/drafter.h"
int layering_control() { return sizeof(tandem::ForwardBatch) > 0; }

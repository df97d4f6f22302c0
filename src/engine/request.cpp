#include "engine/request.h"

namespace tandem {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Cancelled:
      return "cancelled";
    case FinishReason::Error:
      return "error";
    case FinishReason::None:
      break;
  }
  return "";
}

}  // namespace tandem

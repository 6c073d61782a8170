// Op-table rows for softmax, log_softmax and the losses (see op_table.h).
#include "op_table.h"

namespace sinter::testing {

std::vector<OpRow> loss_rows() { return {}; }

}  // namespace sinter::testing

// Op-table rows for conv2d, max/avg/adaptive pooling (see op_table.h).
#include "op_table.h"

namespace sinter::testing {

std::vector<OpRow> conv_pool_rows() { return {}; }

}  // namespace sinter::testing

// The umbrella header: everything a user of Sinter needs.
#pragma once

#include "sinter/autograd.h"
#include "sinter/core/device.h"
#include "sinter/core/dtype.h"
#include "sinter/core/error.h"
#include "sinter/core/generator.h"
#include "sinter/core/storage.h"
#include "sinter/cuda.h"
#include "sinter/data.h"
#include "sinter/dist.h"
#include "sinter/io.h"
#include "sinter/nn.h"
#include "sinter/nn/models.h"
#include "sinter/ops.h"
#include "sinter/optim.h"
#include "sinter/state_dict.h"
#include "sinter/tensor.h"

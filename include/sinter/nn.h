// sinter::nn: modules, layers and parameter initializers.
#pragma once

#include "sinter/nn/activations.h"
#include "sinter/nn/fold.h"
#include "sinter/nn/fuse.h"
#include "sinter/nn/init.h"
#include "sinter/nn/module.h"
#include "sinter/nn/modules.h"
#include "sinter/nn/rnn.h"
#include "sinter/nn/normalization.h"
#include "sinter/nn/pooling.h"
#include "sinter/nn/resampling.h"

// sinter::nn: modules, layers and parameter initializers.
#pragma once

#include "sinter/nn/init.h"
#include "sinter/nn/module.h"
#include "sinter/nn/modules.h"

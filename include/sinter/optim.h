// The optimizers, learning-rate schedulers and gradient clipping of sinter::optim.
#pragma once

#include "sinter/optim/adagrad.h"
#include "sinter/optim/adam.h"
#include "sinter/optim/clip.h"
#include "sinter/optim/grad_scaler.h"
#include "sinter/optim/muon.h"
#include "sinter/optim/optimizer.h"
#include "sinter/optim/rmsprop.h"
#include "sinter/optim/schedulers.h"
#include "sinter/optim/sgd.h"

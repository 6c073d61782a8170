// The data layer: datasets, the DataLoader, file readers and transforms.
#pragma once

#include "sinter/data/dataloader.h"
#include "sinter/data/dataset.h"
#include "sinter/data/transforms.h"
#include "sinter/data/vision.h"

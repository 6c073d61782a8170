// The data layer: datasets, the DataLoader, file readers (images, text) and transforms.
#pragma once

#include "sinter/data/dataloader.h"
#include "sinter/data/dataset.h"
#include "sinter/data/text.h"
#include "sinter/data/tokenizer.h"
#include "sinter/data/tokens.h"
#include "sinter/data/transforms.h"
#include "sinter/data/vision.h"

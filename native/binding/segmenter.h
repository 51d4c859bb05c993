// class TsSegmenter: the JS face of segment::TsSegmenter (docs/native-api.md "TsSegmenter").
#pragma once
#include "binding/addon_state.h"

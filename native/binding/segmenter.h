// classes Segmenter and TsSegmenter, function probeAudioTag: the JS face of segment::Segmenter
// (docs/native-api.md "Segmenter", "TsSegmenter", "probeAudioTag").
#pragma once
#include "binding/addon_state.h"

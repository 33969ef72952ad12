package main

/*
#include "bridge.h"
*/
import "C"

import "github.com/kvwarden/kvwarden/engine/sample"

// sampling converts normalized kvw_request_params to sample.Params. The
// engine validates them at admission (ErrInvalidParams). Every seed but
// KVW_SEED_RANDOM, 0 included, is a fixed seed.
func sampling(p *C.kvw_request_params) sample.Params {
	return sample.Params{
		Temperature:   float32(p.temperature),
		TopK:          int(p.top_k),
		TopP:          float32(p.top_p),
		MinP:          float32(p.min_p),
		RepeatPenalty: float32(p.repeat_penalty),
		RepeatLastN:   int(p.repeat_last_n),
		Seed:          uint64(p.seed),
		HasSeed:       uint64(p.seed) != uint64(C.KVW_SEED_RANDOM),
	}
}

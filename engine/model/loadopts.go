package model

import "github.com/kvwarden/kvwarden/engine/model/gguf/mmap"

// LoadOptions tune how OpenWith and LoadWith load a model file.
type LoadOptions struct {
	// Mode is the weight placement (mmap.Mode): "" follows the
	// KVWARDEN_WEIGHTS environment variable, else mmap.ModeAuto, which
	// puts the weights on 2 MiB pages where that is cheap and safe
	// (decode runs 1.2-1.4x faster per CPU-second there) and leaves them
	// mapped on 4 KiB pages otherwise.
	Mode mmap.Mode
}

package engine

import (
	"log/slog"
	"os"

	"github.com/kvwarden/kvwarden/engine/backend/cpu"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gguf/mmap"
)

// weightPages is the placement the model file is loaded with. Auto on a
// device other than the CPU maps the file as it is: that runner uploads
// the weights, so a recache or a copy would cost a read for nothing (and
// a copy would hold a second host copy).
func weightPages(c Config, device string) mmap.Mode {
	name := c.WeightPages // checked by checkFields
	if name == "" {
		name = os.Getenv(mmap.ModeEnv)
	}
	m, err := mmap.ParseMode(name)
	if err != nil {
		return "" // a bad variable: the loader reports it
	}
	if m == mmap.ModeAuto && device != cpu.Name {
		return mmap.ModeMap
	}
	return m
}

// draftWeightPages is the placement of a draft model, which runs on the
// CPU (model.Runner) whatever the device.
func draftWeightPages(c Config) mmap.Mode { return weightPages(c, cpu.Name) }

// logPlacement logs, once per load, which page size the weights got and
// why: a decode 1.2-1.4x slower on 4 KiB pages should be explainable from
// the log.
func logPlacement(log *slog.Logger, w *model.Weights) {
	p := w.Placement
	if p.Mode == "" {
		return // not loaded from a file
	}
	log.Info("engine: weights on "+p.PageSize()+" pages", "model", w.Name, "placement", string(p.Mode), "asked", string(p.Asked), "why", p.Reason)
}

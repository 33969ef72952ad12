package engine

// The built-in device backends register themselves (engine/backend); this
// is the only place the engine names them. A new device is a package that
// registers a backend.Driver, imported here or by the application.
import (
	_ "github.com/kvwarden/kvwarden/engine/backend/cpu"
	_ "github.com/kvwarden/kvwarden/engine/backend/cuda"
)

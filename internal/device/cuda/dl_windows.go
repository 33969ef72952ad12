//go:build windows

package cuda

import (
	"fmt"

	"github.com/kvwarden/kvwarden/internal/device"
)

// errNoCUDA is what every loader call returns on Windows: kvwarden loads
// libcuda through dlopen, which Windows does not have, so the engine runs on
// the CPU there.
var errNoCUDA = fmt.Errorf("%w: CUDA is not supported on this system (windows); use the CPU device", device.ErrUnavailable)

func dlopen(string) (uintptr, error) { return 0, errNoCUDA }

func dlsym(uintptr, string) (uintptr, error) { return 0, errNoCUDA }

func dlclose(uintptr) error { return errNoCUDA }

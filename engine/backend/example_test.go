package backend_test

import (
	"errors"
	"fmt"

	"github.com/kvwarden/kvwarden/engine/backend"
)

// A device backend is a package that registers a driver from init; the
// engine then accepts its name as Config.Device. This one never finds its
// device, so naming it fails with the driver's reason, and device auto
// never tries it (Auto is false).
func ExampleRegister() {
	backend.Register("my-accel", backend.Driver{
		Open: func() (backend.Backend, error) { return nil, errors.New("my-accel: no device found") },
	})
	fmt.Println(backend.Check("my-accel") == nil)
	_, err := backend.Resolve("my-accel", nil)
	fmt.Println(err)
	fmt.Println(errors.Is(backend.Check("tpu"), backend.ErrUnknown))
	// Output:
	// true
	// device "my-accel": my-accel: no device found
	// true
}

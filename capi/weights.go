package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"unsafe"

	"github.com/kvwarden/kvwarden/engine/model/gguf/mmap"
)

// weightPagesEnv reads KVWARDEN_WEIGHTS (the weight placement) from the C
// environment at each kvw_engine_open. The Go runtime's own copy of the
// environment is taken when the library is loaded, so a variable set
// after that (Python's os.environ, setenv) would be missed by os.Getenv.
// A bad value is KVW_ERR_INVALID_ARGUMENT naming the variable.
func weightPagesEnv(fn string) (string, C.int32_t) {
	name := C.CString(mmap.ModeEnv)
	defer C.free(unsafe.Pointer(name))
	v := C.getenv(name)
	if v == nil {
		return string(mmap.ModeAuto), stOK // not the load-time copy's value
	}
	s := C.GoString(v)
	if _, err := mmap.ParseMode(s); err != nil {
		return "", fail(stInvalid, "%s: %s: %v", fn, mmap.ModeEnv, err)
	}
	return s, stOK
}

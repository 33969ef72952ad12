//go:build !windows

package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

// purego passes at most 15 integer arguments, and cublasGemmEx takes 19.
// callN calls a C function with up to 24 integer arguments through a small
// System V x86-64 trampoline: it receives (fn, args) and loads args[0..5]
// into registers and args[6..23] onto the stack before calling fn.
var trampCode = []byte{
	0x55,             // push rbp
	0x48, 0x89, 0xe5, // mov rbp, rsp
	0x48, 0x81, 0xec, 0x90, 0x00, 0x00, 0x00, // sub rsp, 144 (18 slots, keeps 16-byte alignment)
	0x48, 0x89, 0xf8, // mov rax, rdi (fn)
	0x49, 0x89, 0xf2, // mov r10, rsi (args)
	0x49, 0x8d, 0x72, 0x30, // lea rsi, [r10+48]
	0x48, 0x89, 0xe7, // mov rdi, rsp
	0xb9, 0x12, 0x00, 0x00, 0x00, // mov ecx, 18
	0xfc,             // cld
	0xf3, 0x48, 0xa5, // rep movsq
	0x49, 0x8b, 0x3a, // mov rdi, [r10]
	0x49, 0x8b, 0x72, 0x08, // mov rsi, [r10+8]
	0x49, 0x8b, 0x52, 0x10, // mov rdx, [r10+16]
	0x49, 0x8b, 0x4a, 0x18, // mov rcx, [r10+24]
	0x4d, 0x8b, 0x42, 0x20, // mov r8, [r10+32]
	0x4d, 0x8b, 0x4a, 0x28, // mov r9, [r10+40]
	0x49, 0x89, 0xc3, // mov r11, rax
	0x31, 0xc0, // xor eax, eax (no vector registers, for variadic callees)
	0x41, 0xff, 0xd3, // call r11
	0xc9, // leave
	0xc3, // ret
}

// callArgs is the argument block the trampoline reads: C memory, so the
// callee never sees Go memory.
const callArgs = 24

var tramp struct {
	once sync.Once
	code []byte
	args []uint64
	mu   sync.Mutex
	err  error
}

func trampInit() error {
	tramp.once.Do(func() {
		mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err != nil {
			tramp.err = fmt.Errorf("cuda: call trampoline: mmap: %w", err)
			return
		}
		copy(mem, trampCode)
		if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_EXEC); err != nil {
			tramp.err = fmt.Errorf("cuda: call trampoline: mprotect: %w", err)
			return
		}
		// The argument block is a separate page: mprotect works on whole pages.
		data, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err != nil {
			tramp.err = fmt.Errorf("cuda: call trampoline: mmap: %w", err)
			return
		}
		tramp.code = mem
		tramp.args = unsafe.Slice((*uint64)(unsafe.Pointer(&data[0])), callArgs)
	})
	return tramp.err
}

// callN calls fn with args (integers or pointers to C memory) and returns
// its integer result.
func callN(fn uintptr, args ...uint64) (uint64, error) {
	if len(args) > callArgs {
		return 0, fmt.Errorf("cuda: callN with %d arguments, at most %d", len(args), callArgs)
	}
	if err := trampInit(); err != nil {
		return 0, err
	}
	tramp.mu.Lock()
	defer tramp.mu.Unlock()
	clear(tramp.args)
	copy(tramp.args, args)
	r, _, _ := purego.SyscallN(uintptr(unsafe.Pointer(&tramp.code[0])), fn, uintptr(unsafe.Pointer(&tramp.args[0])))
	return uint64(r), nil
}

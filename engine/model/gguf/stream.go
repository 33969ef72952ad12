package gguf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// StreamTensor is a tensor whose bytes WriteStream asks for only when it
// writes them, so that a file larger than memory (a multi-gigabyte
// benchmark model) can be written holding one tensor at a time.
type StreamTensor struct {
	Name string
	Type GGMLType
	Dims []uint64 // ggml order (Dims[0] = columns)
	// Fill writes the tensor's bytes into dst, which has exactly the
	// tensor's size.
	Fill func(dst []byte) error
}

// WriteStream writes b's metadata and tensors, then ts after them, to w.
// The file is the one Bytes would produce had ts been added with
// AddTensor, but each streamed tensor's data exists only while it is
// written.
func (b *Builder) WriteStream(w io.Writer, ts []StreamTensor) error {
	if b.err != nil {
		return b.err
	}
	if b.Version != 2 && b.Version != 3 {
		return fmt.Errorf("gguf: cannot write version %d", b.Version)
	}
	// The checks AddTensor makes, and each streamed tensor's size.
	sizes := make([]int, len(ts))
	names := map[string]bool{}
	for n := range b.names {
		names[n] = true
	}
	for i, t := range ts {
		if t.Fill == nil {
			return fmt.Errorf("gguf: stream tensor %q: no Fill", t.Name)
		}
		if names[t.Name] {
			return fmt.Errorf("gguf: duplicate tensor %q", t.Name)
		}
		names[t.Name] = true
		if !t.Type.Known() || len(t.Dims) > MaxDims || len(t.Dims) == 0 {
			return fmt.Errorf("gguf: stream tensor %q: type %v with %d dims", t.Name, t.Type, len(t.Dims))
		}
		n := uint64(1)
		for _, d := range t.Dims {
			n *= d
		}
		bs, bb := uint64(t.Type.BlockSize()), uint64(t.Type.BlockBytes())
		if t.Dims[0]%bs != 0 {
			return fmt.Errorf("gguf: tensor %q: %d columns is not a multiple of the %v block size", t.Name, t.Dims[0], t.Type)
		}
		sizes[i] = int(n / bs * bb)
	}
	// The header lists the builder's tensors, then the streamed ones (with
	// no data yet; header takes their sizes from sizes).
	hb := &Builder{Version: b.Version, kvs: b.kvs, kvIndex: b.kvIndex, names: names}
	hb.tensors = append(hb.tensors, b.tensors...)
	for _, t := range ts {
		hb.tensors = append(hb.tensors, builderTensor{t.Name, t.Type, append([]uint64(nil), t.Dims...), nil})
	}
	align, err := hb.alignment()
	if err != nil {
		return err
	}
	e := hb.header(align, func(i int) uint64 {
		if i < len(b.tensors) {
			return uint64(len(b.tensors[i].data))
		}
		return uint64(sizes[i-len(b.tensors)])
	})
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.Write(e.b); err != nil {
		return err
	}
	pad := func(n int) error {
		if r := uint64(n) % align; r != 0 {
			_, err := bw.Write(make([]byte, align-r))
			return err
		}
		return nil
	}
	for _, t := range b.tensors {
		if _, err := bw.Write(t.data); err != nil {
			return err
		}
		if err := pad(len(t.data)); err != nil {
			return err
		}
	}
	for i, t := range ts {
		buf := make([]byte, sizes[i])
		if err := t.Fill(buf); err != nil {
			return fmt.Errorf("gguf: stream tensor %q: %w", t.Name, err)
		}
		if _, err := bw.Write(buf); err != nil {
			return err
		}
		if err := pad(len(buf)); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// alignment is general.alignment, DefaultAlignment unless set.
func (b *Builder) alignment() (uint64, error) {
	align := uint64(DefaultAlignment)
	if i, ok := b.kvIndex["general.alignment"]; ok {
		a, ok := b.kvs[i].Value.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return 0, errors.New("gguf: general.alignment must be a uint32 power of two")
		}
		align = uint64(a)
	}
	return align, nil
}

// header encodes the file up to the tensor data (padded to align), with
// size(i) the byte size of tensor i.
func (b *Builder) header(align uint64, size func(i int) uint64) *encoder {
	e := &encoder{}
	e.raw([]byte(Magic))
	e.u32(b.Version)
	e.u64(uint64(len(b.tensors)))
	e.u64(uint64(len(b.kvs)))
	for _, kv := range b.kvs {
		e.str(kv.Key)
		e.u32(uint32(kv.Type))
		// Values were checked by Set.
		_ = e.value(kv.Type, kv.Value)
	}
	off := uint64(0)
	for i, t := range b.tensors {
		e.str(t.name)
		e.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			e.u64(d)
		}
		e.u32(uint32(t.typ))
		e.u64(off)
		off = alignUp(off+size(i), align)
	}
	e.pad(align)
	return e
}

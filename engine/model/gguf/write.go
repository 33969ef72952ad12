package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// Builder assembles a GGUF file in memory: metadata in insertion order and
// tensors packed in insertion order, each aligned to general.alignment
// (DefaultAlignment unless set). It is meant for tests and small tools
// (making test models); it holds all tensor data in memory.
//
// Errors from Set and AddTensor are remembered and returned by Bytes.
type Builder struct {
	Version uint32 // 3 unless changed; 2 is also accepted

	kvs     []KV
	kvIndex map[string]int
	tensors []builderTensor
	names   map[string]bool
	err     error
}

type builderTensor struct {
	name string
	typ  GGMLType
	dims []uint64
	data []byte
}

// NewBuilder returns an empty version-3 builder.
func NewBuilder() *Builder {
	return &Builder{Version: 3, kvIndex: map[string]int{}, names: map[string]bool{}}
}

func (b *Builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Set adds or replaces a metadata entry. value must be one of the Go types
// listed for KV.Value, a slice of one of the scalar types, or []*Array.
func (b *Builder) Set(key string, value any) *Builder {
	t, v, err := normalize(value)
	if err != nil {
		b.fail(fmt.Errorf("gguf: metadata %q: %w", key, err))
		return b
	}
	if i, ok := b.kvIndex[key]; ok {
		b.kvs[i].Type, b.kvs[i].Value = t, v
		return b
	}
	b.kvIndex[key] = len(b.kvs)
	b.kvs = append(b.kvs, KV{Key: key, Type: t, Value: v})
	return b
}

// AddTensor adds a tensor. dims are in ggml order (dims[0] = columns);
// data must hold exactly the tensor's bytes. data is not copied.
func (b *Builder) AddTensor(name string, t GGMLType, dims []uint64, data []byte) *Builder {
	if b.names[name] {
		b.fail(fmt.Errorf("gguf: duplicate tensor %q", name))
		return b
	}
	if !t.Known() {
		b.fail(fmt.Errorf("gguf: tensor %q: unknown type %v", name, t))
		return b
	}
	if len(dims) > MaxDims {
		b.fail(fmt.Errorf("gguf: tensor %q: %d dims", name, len(dims)))
		return b
	}
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	cols := uint64(1)
	if len(dims) > 0 {
		cols = dims[0]
	}
	bs, bb := uint64(t.BlockSize()), uint64(t.BlockBytes())
	if cols%bs != 0 {
		b.fail(fmt.Errorf("gguf: tensor %q: %d columns is not a multiple of the %v block size", name, cols, t))
		return b
	}
	if want := n / bs * bb; uint64(len(data)) != want {
		b.fail(fmt.Errorf("gguf: tensor %q: %d bytes of data, want %d", name, len(data), want))
		return b
	}
	b.names[name] = true
	b.tensors = append(b.tensors, builderTensor{name, t, append([]uint64(nil), dims...), data})
	return b
}

// AddF32 adds an F32 tensor from float32 values.
func (b *Builder) AddF32(name string, dims []uint64, values []float32) *Builder {
	data := make([]byte, 4*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return b.AddTensor(name, TypeF32, dims, data)
}

// Bytes encodes the file.
func (b *Builder) Bytes() ([]byte, error) {
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteFile encodes the file to path.
func (b *Builder) WriteFile(path string) error {
	data, err := b.Bytes()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// WriteTo encodes the file to w.
func (b *Builder) WriteTo(w io.Writer) (int64, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.Version != 2 && b.Version != 3 {
		return 0, fmt.Errorf("gguf: cannot write version %d", b.Version)
	}
	align := uint64(DefaultAlignment)
	if i, ok := b.kvIndex["general.alignment"]; ok {
		a, ok := b.kvs[i].Value.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return 0, errors.New("gguf: general.alignment must be a uint32 power of two")
		}
		align = uint64(a)
	}
	e := &encoder{}
	e.raw([]byte(Magic))
	e.u32(b.Version)
	e.u64(uint64(len(b.tensors)))
	e.u64(uint64(len(b.kvs)))
	for _, kv := range b.kvs {
		e.str(kv.Key)
		e.u32(uint32(kv.Type))
		if err := e.value(kv.Type, kv.Value); err != nil {
			return 0, fmt.Errorf("gguf: metadata %q: %w", kv.Key, err)
		}
	}
	off := uint64(0)
	for _, t := range b.tensors {
		e.str(t.name)
		e.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			e.u64(d)
		}
		e.u32(uint32(t.typ))
		e.u64(off)
		off = alignUp(off+uint64(len(t.data)), align)
	}
	e.pad(align)
	for _, t := range b.tensors {
		e.raw(t.data)
		e.pad(align)
	}
	n, err := w.Write(e.b)
	return int64(n), err
}

type encoder struct{ b []byte }

func (e *encoder) raw(p []byte) { e.b = append(e.b, p...) }
func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) pad(a uint64) {
	for uint64(len(e.b))%a != 0 {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) value(t ValueType, v any) error {
	switch x := v.(type) {
	case uint8:
		e.b = append(e.b, x)
	case int8:
		e.b = append(e.b, byte(x))
	case bool:
		if x {
			e.b = append(e.b, 1)
		} else {
			e.b = append(e.b, 0)
		}
	case uint16:
		e.b = binary.LittleEndian.AppendUint16(e.b, x)
	case int16:
		e.b = binary.LittleEndian.AppendUint16(e.b, uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case string:
		e.str(x)
	case *Array:
		e.u32(uint32(x.Elem))
		e.u64(uint64(x.Len()))
		switch s := x.Values.(type) {
		case []string:
			for _, v := range s {
				e.str(v)
			}
		case []*Array:
			for _, v := range s {
				if err := e.value(ValueArray, v); err != nil {
					return err
				}
			}
		default:
			n := x.Len()
			for i := 0; i < n; i++ {
				if err := e.value(x.Elem, index(x.Values, i)); err != nil {
					return err
				}
			}
		}
	default:
		return fmt.Errorf("unsupported value type %T", v)
	}
	return nil
}

// index returns element i of a scalar slice.
func index(s any, i int) any {
	switch v := s.(type) {
	case []uint8:
		return v[i]
	case []int8:
		return v[i]
	case []uint16:
		return v[i]
	case []int16:
		return v[i]
	case []uint32:
		return v[i]
	case []int32:
		return v[i]
	case []float32:
		return v[i]
	case []bool:
		return v[i]
	case []uint64:
		return v[i]
	case []int64:
		return v[i]
	case []float64:
		return v[i]
	}
	return nil
}

// normalize maps a Go value to its GGUF type, wrapping slices in *Array.
func normalize(v any) (ValueType, any, error) {
	switch x := v.(type) {
	case uint8:
		return ValueUint8, x, nil
	case int8:
		return ValueInt8, x, nil
	case uint16:
		return ValueUint16, x, nil
	case int16:
		return ValueInt16, x, nil
	case uint32:
		return ValueUint32, x, nil
	case int32:
		return ValueInt32, x, nil
	case float32:
		return ValueFloat32, x, nil
	case bool:
		return ValueBool, x, nil
	case string:
		return ValueString, x, nil
	case uint64:
		return ValueUint64, x, nil
	case int64:
		return ValueInt64, x, nil
	case float64:
		return ValueFloat64, x, nil
	case *Array:
		if x == nil {
			return 0, nil, errors.New("nil array")
		}
		if err := checkArray(x, 0); err != nil {
			return 0, nil, err
		}
		return ValueArray, x, nil
	}
	elem, ok := sliceElem(v)
	if !ok {
		return 0, nil, fmt.Errorf("unsupported value type %T", v)
	}
	a := &Array{Elem: elem, Values: v}
	if err := checkArray(a, 0); err != nil {
		return 0, nil, err
	}
	return ValueArray, a, nil
}

func sliceElem(v any) (ValueType, bool) {
	switch v.(type) {
	case []uint8:
		return ValueUint8, true
	case []int8:
		return ValueInt8, true
	case []uint16:
		return ValueUint16, true
	case []int16:
		return ValueInt16, true
	case []uint32:
		return ValueUint32, true
	case []int32:
		return ValueInt32, true
	case []float32:
		return ValueFloat32, true
	case []bool:
		return ValueBool, true
	case []string:
		return ValueString, true
	case []uint64:
		return ValueUint64, true
	case []int64:
		return ValueInt64, true
	case []float64:
		return ValueFloat64, true
	case []*Array:
		return ValueArray, true
	}
	return 0, false
}

func checkArray(a *Array, depth int) error {
	if depth >= maxArrayDepth {
		return fmt.Errorf("arrays nested more than %d deep", maxArrayDepth)
	}
	elem, ok := sliceElem(a.Values)
	if !ok || elem != a.Elem {
		return fmt.Errorf("array of %v holds %T", a.Elem, a.Values)
	}
	if sub, ok := a.Values.([]*Array); ok {
		for _, s := range sub {
			if s == nil {
				return errors.New("nil nested array")
			}
			if err := checkArray(s, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

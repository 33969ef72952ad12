// Package gguf reads (and, for tests and tools, writes) GGUF files, the
// model container of llama.cpp/ggml, versions 2 and 3 (little-endian).
//
// Open maps a file read-only and parses its header: every metadata value
// is decoded into Go memory, and every tensor's data is a bounds-checked
// slice of the mapping. The parser treats the input as hostile: each count
// and length is checked against the bytes that remain before anything is
// allocated, size arithmetic is overflow-checked, and every failure is a
// *FormatError naming the field and its byte offset. It never panics and
// never reads outside the input.
//
// FuzzParse (gguf_test.go) fuzzes Parse; its seed corpus in
// testdata/fuzz/FuzzParse runs with every go test. For a short CI run:
//
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 30s ./engine/model/gguf/
package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/kvwarden/kvwarden/engine/model/gguf/mmap"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

// MaxDims is the most dimensions a tensor may have (GGML_MAX_DIMS).
const MaxDims = 4

// maxArrayDepth bounds the nesting of array values, so hostile input
// cannot drive the parser's recursion arbitrarily deep.
const maxArrayDepth = 8

// KV is one metadata entry. Value holds the Go type that matches Type:
// uint8, int8, uint16, int16, uint32, int32, float32, bool, string,
// uint64, int64, float64, or *Array.
type KV struct {
	Key    string
	Type   ValueType
	Value  any
	Offset int64 // file offset of the entry (its key)
}

// Array is an array metadata value. Values is a slice of the Go type that
// matches Elem ([]uint8 ... []float64, []string, []bool), or []*Array for
// arrays of arrays.
type Array struct {
	Elem   ValueType
	Values any
}

// Len is the number of elements.
func (a *Array) Len() int {
	switch v := a.Values.(type) {
	case []uint8:
		return len(v)
	case []int8:
		return len(v)
	case []uint16:
		return len(v)
	case []int16:
		return len(v)
	case []uint32:
		return len(v)
	case []int32:
		return len(v)
	case []float32:
		return len(v)
	case []bool:
		return len(v)
	case []string:
		return len(v)
	case []uint64:
		return len(v)
	case []int64:
		return len(v)
	case []float64:
		return len(v)
	case []*Array:
		return len(v)
	}
	return 0
}

// TensorInfo describes one tensor.
type TensorInfo struct {
	Name string
	// Dims in ggml order: Dims[0] is the contiguous dimension (a matrix's
	// columns), Dims[1] the rows, and so on.
	Dims     []uint64
	Type     GGMLType
	Offset   uint64 // of the data, relative to the start of the data section
	Size     uint64 // bytes of data
	Elements uint64
	// InfoOffset is the file offset of this tensor's info record.
	InfoOffset int64
	// Data is the tensor's bytes. It aliases the file: it is valid until
	// the File is closed and must not be written.
	Data []byte
}

// File is a parsed GGUF file.
type File struct {
	Version   uint32
	Alignment uint64 // general.alignment, or DefaultAlignment
	Metadata  []KV   // in file order
	Tensors   []TensorInfo
	// DataOffset is the file offset of the data section (aligned).
	DataOffset int64
	Size       int64 // bytes in the file

	kvIndex     map[string]int
	tensorIndex map[string]int
	region      *mmap.Region
}

// FormatError reports malformed input.
type FormatError struct {
	Field  string // what was being read, e.g. "tensor count"
	Offset int64  // file offset of that field
	Msg    string // the complete message, without the "gguf: " prefix
}

func (e *FormatError) Error() string { return "gguf: " + e.Msg }

// ferr builds a FormatError whose message reads "<field> at offset <off> <detail>".
func ferr(field string, off int, detail string, args ...any) error {
	return &FormatError{
		Field:  field,
		Offset: int64(off),
		Msg:    fmt.Sprintf("%s at offset %d %s", field, off, fmt.Sprintf(detail, args...)),
	}
}

// Open maps the file at path read-only and parses it. Close releases the
// mapping; metadata stays usable afterwards, tensor data does not.
func Open(path string) (*File, error) { return OpenWith(path, mmap.Options{}) }

// OpenWith is Open with the weight placement o (mmap.MapWith).
func OpenWith(path string, o mmap.Options) (*File, error) {
	r, err := mmap.MapWith(path, o)
	if err != nil {
		return nil, err
	}
	f, err := Parse(r.Data)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.region = r
	return f, nil
}

// Placement says how Open placed the file in memory (the zero Placement
// for Parse).
func (f *File) Placement() mmap.Placement {
	if f == nil || f.region == nil {
		return mmap.Placement{}
	}
	return f.region.Placement
}

// Close releases the file mapping made by Open (a no-op for Parse). Tensor
// data slices must not be used afterwards. Close is idempotent.
func (f *File) Close() error {
	if f == nil || f.region == nil {
		return nil
	}
	r := f.region
	f.region = nil
	for i := range f.Tensors {
		f.Tensors[i].Data = nil
	}
	return r.Close()
}

type reader struct {
	b   []byte
	off int
}

func (r *reader) remaining() uint64 { return uint64(len(r.b) - r.off) }

// take returns the next n bytes, or an error naming field.
func (r *reader) take(field string, n uint64) ([]byte, error) {
	if n > r.remaining() {
		return nil, ferr(field, r.off, "is truncated: needs %d bytes, %d remain (file is %d bytes)", n, r.remaining(), len(r.b))
	}
	b := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return b, nil
}

func (r *reader) u32(field string) (uint32, error) {
	b, err := r.take(field, 4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64(field string) (uint64, error) {
	b, err := r.take(field, 8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a length-prefixed string. The length is checked against the
// remaining bytes before the string is copied.
func (r *reader) str(field string) (string, error) {
	start := r.off
	n, err := r.u64(field + " length")
	if err != nil {
		return "", err
	}
	if n > r.remaining() {
		r.off = start
		return "", ferr(field+" length", start, "is %d, exceeds the %d bytes remaining in the file", n, r.remaining()-8)
	}
	s := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return s, nil
}

// Parse parses a GGUF file held in memory. The File refers to data (tensor
// data is not copied), so data must stay unchanged while the File is used.
func Parse(data []byte) (*File, error) {
	r := &reader{b: data}
	magic, err := r.take("magic", 4)
	if err != nil {
		return nil, err
	}
	if string(magic) != Magic {
		return nil, ferr("magic", 0, "is %q, want %q: not a GGUF file", magic, Magic)
	}
	version, err := r.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version != 0 && version&0xffff == 0 && bits.ReverseBytes32(version) <= 3:
		return nil, ferr("version", 4, "is %#x: a big-endian GGUF file, which is not supported", version)
	default:
		return nil, ferr("version", 4, "is %d: only GGUF versions 2 and 3 are supported", version)
	}
	f := &File{Version: version, Alignment: DefaultAlignment, Size: int64(len(data))}

	nTensors, err := r.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := r.u64("metadata count")
	if err != nil {
		return nil, err
	}
	// A tensor info needs at least 24 bytes (empty name, zero dims, type,
	// offset), a metadata entry at least 13 (empty key, type, one byte).
	const minTensorInfo, minKV = 24, 13
	if nTensors > r.remaining()/minTensorInfo {
		return nil, ferr("tensor count", 8, "is %d, exceeds file size: %d tensor infos need at least %d bytes each, %d bytes remain", nTensors, nTensors, minTensorInfo, r.remaining())
	}
	if nKV > (r.remaining()-nTensors*minTensorInfo)/minKV {
		return nil, ferr("metadata count", 16, "is %d, exceeds file size: %d entries need at least %d bytes each, %d bytes remain", nKV, nKV, minKV, r.remaining())
	}

	f.Metadata = make([]KV, 0, nKV)
	f.kvIndex = make(map[string]int, nKV)
	for i := uint64(0); i < nKV; i++ {
		start := r.off
		key, err := r.str(fmt.Sprintf("metadata key #%d", i))
		if err != nil {
			return nil, err
		}
		if _, dup := f.kvIndex[key]; dup {
			return nil, ferr(fmt.Sprintf("metadata key %q", key), start, "is a duplicate")
		}
		field := fmt.Sprintf("metadata %q", key)
		typOff := r.off
		t, err := r.u32(field + " type")
		if err != nil {
			return nil, err
		}
		if ValueType(t).minSize() == 0 {
			return nil, ferr(field+" type", typOff, "is %d, not a GGUF value type", t)
		}
		v, err := r.value(ValueType(t), field, 0)
		if err != nil {
			return nil, err
		}
		f.kvIndex[key] = len(f.Metadata)
		f.Metadata = append(f.Metadata, KV{Key: key, Type: ValueType(t), Value: v, Offset: int64(start)})
	}

	if i, ok := f.kvIndex["general.alignment"]; ok {
		kv := f.Metadata[i]
		a, isU32 := kv.Value.(uint32)
		switch {
		case !isU32:
			return nil, ferr("general.alignment", int(kv.Offset), "has type %v, want uint32", kv.Type)
		case a == 0 || a&(a-1) != 0:
			return nil, ferr("general.alignment", int(kv.Offset), "is %d, not a power of two", a)
		}
		f.Alignment = uint64(a)
	}

	f.Tensors = make([]TensorInfo, nTensors)
	f.tensorIndex = make(map[string]int, nTensors)
	for i := range f.Tensors {
		if err := r.tensorInfo(f, i); err != nil {
			return nil, err
		}
	}

	// The data section starts at the next multiple of the alignment.
	dataStart := alignUp(uint64(r.off), f.Alignment)
	f.DataOffset = int64(dataStart)
	var avail uint64
	if dataStart < uint64(len(data)) {
		avail = uint64(len(data)) - dataStart
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset > avail || t.Size > avail-t.Offset {
			return nil, ferr(fmt.Sprintf("tensor %q data offset", t.Name), int(t.InfoOffset)+len(t.Name)+8+4+8*len(t.Dims)+4,
				"is %d with size %d, extends past the end of the file: the data section starts at %d, the file is %d bytes",
				t.Offset, t.Size, dataStart, len(data))
		}
		if t.Size > 0 {
			lo := int(dataStart + t.Offset)
			hi := lo + int(t.Size)
			t.Data = data[lo:hi:hi]
		}
	}
	return f, nil
}

func alignUp(n, a uint64) uint64 {
	if r := n % a; r != 0 {
		return n + (a - r) // n <= len(data), so this cannot overflow
	}
	return n
}

func (r *reader) tensorInfo(f *File, i int) error {
	start := r.off
	name, err := r.str(fmt.Sprintf("tensor #%d name", i))
	if err != nil {
		return err
	}
	if _, dup := f.tensorIndex[name]; dup {
		return ferr(fmt.Sprintf("tensor name %q", name), start, "is a duplicate")
	}
	field := fmt.Sprintf("tensor %q", name)
	ndOff := r.off
	nd, err := r.u32(field + " dimension count")
	if err != nil {
		return err
	}
	if nd > MaxDims {
		return ferr(field+" dimension count", ndOff, "is %d, more than %d", nd, MaxDims)
	}
	dims := make([]uint64, nd)
	elements := uint64(1)
	for j := range dims {
		dOff := r.off
		d, err := r.u64(fmt.Sprintf("%s dimension %d", field, j))
		if err != nil {
			return err
		}
		if d > math.MaxInt64 {
			return ferr(fmt.Sprintf("%s dimension %d", field, j), dOff, "is %d, too large", d)
		}
		hi, lo := bits.Mul64(elements, d)
		if hi != 0 || lo > math.MaxInt64 {
			return ferr(fmt.Sprintf("%s dimension %d", field, j), dOff, "is %d: the element count overflows", d)
		}
		dims[j] = d
		elements = lo
	}
	typOff := r.off
	t32, err := r.u32(field + " type")
	if err != nil {
		return err
	}
	typ := GGMLType(t32)
	if !typ.Known() {
		return ferr(field+" type", typOff, "is %d, not a known ggml type", t32)
	}
	bs, bb := uint64(typ.BlockSize()), uint64(typ.BlockBytes())
	cols := uint64(1)
	if nd > 0 {
		cols = dims[0]
	}
	if cols%bs != 0 {
		return ferr(field+" dimension 0", ndOff+4, "is %d, not a multiple of the %v block size %d", cols, typ, bs)
	}
	hi, size := bits.Mul64(elements/bs, bb)
	if hi != 0 || size > math.MaxInt64 {
		return ferr(field+" size", typOff, "overflows: %d elements of %v", elements, typ)
	}
	offOff := r.off
	off, err := r.u64(field + " data offset")
	if err != nil {
		return err
	}
	if off%f.Alignment != 0 {
		return ferr(field+" data offset", offOff, "is %d, not a multiple of the alignment %d", off, f.Alignment)
	}
	f.tensorIndex[name] = i
	f.Tensors[i] = TensorInfo{Name: name, Dims: dims, Type: typ, Offset: off, Size: size, Elements: elements, InfoOffset: int64(start)}
	return nil
}

// value reads one metadata value of type t.
func (r *reader) value(t ValueType, field string, depth int) (any, error) {
	switch t {
	case ValueString:
		return r.str(field)
	case ValueArray:
		return r.array(field, depth)
	}
	b, err := r.take(field, t.minSize())
	if err != nil {
		return nil, err
	}
	switch t {
	case ValueUint8:
		return b[0], nil
	case ValueInt8:
		return int8(b[0]), nil
	case ValueBool:
		return b[0] != 0, nil
	case ValueUint16:
		return binary.LittleEndian.Uint16(b), nil
	case ValueInt16:
		return int16(binary.LittleEndian.Uint16(b)), nil
	case ValueUint32:
		return binary.LittleEndian.Uint32(b), nil
	case ValueInt32:
		return int32(binary.LittleEndian.Uint32(b)), nil
	case ValueFloat32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b)), nil
	case ValueUint64:
		return binary.LittleEndian.Uint64(b), nil
	case ValueInt64:
		return int64(binary.LittleEndian.Uint64(b)), nil
	case ValueFloat64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	}
	return nil, ferr(field+" type", r.off, "is %d, not a GGUF value type", uint32(t)) // unreachable: callers check
}

func (r *reader) array(field string, depth int) (*Array, error) {
	start := r.off
	if depth >= maxArrayDepth {
		return nil, ferr(field, start, "nests arrays more than %d deep", maxArrayDepth)
	}
	et32, err := r.u32(field + " element type")
	if err != nil {
		return nil, err
	}
	et := ValueType(et32)
	ms := et.minSize()
	if ms == 0 {
		return nil, ferr(field+" element type", start, "is %d, not a GGUF value type", et32)
	}
	nOff := r.off
	n, err := r.u64(field + " length")
	if err != nil {
		return nil, err
	}
	if n > r.remaining()/ms {
		return nil, ferr(field+" length", nOff, "is %d, exceeds file size: %v elements need at least %d bytes each, %d bytes remain", n, et, ms, r.remaining())
	}
	a := &Array{Elem: et}
	if et != ValueString && et != ValueArray {
		b, _ := r.take(field, n*ms) // checked above
		a.Values = decodeFixed(et, b, int(n))
		return a, nil
	}
	if et == ValueString {
		v := make([]string, n)
		for i := range v {
			lOff := r.off
			l, err := r.u64(field + " element length")
			if err != nil {
				return nil, err
			}
			if l > r.remaining() {
				return nil, ferr(fmt.Sprintf("%s[%d] length", field, i), lOff, "is %d, exceeds the %d bytes remaining in the file", l, r.remaining())
			}
			v[i] = string(r.b[r.off : r.off+int(l)])
			r.off += int(l)
		}
		a.Values = v
		return a, nil
	}
	v := make([]*Array, n)
	for i := range v {
		if v[i], err = r.array(fmt.Sprintf("%s[%d]", field, i), depth+1); err != nil {
			return nil, err
		}
	}
	a.Values = v
	return a, nil
}

func decodeFixed(t ValueType, b []byte, n int) any {
	le := binary.LittleEndian
	switch t {
	case ValueUint8:
		return append([]uint8(nil), b...)
	case ValueInt8:
		v := make([]int8, n)
		for i := range v {
			v[i] = int8(b[i])
		}
		return v
	case ValueBool:
		v := make([]bool, n)
		for i := range v {
			v[i] = b[i] != 0
		}
		return v
	case ValueUint16:
		v := make([]uint16, n)
		for i := range v {
			v[i] = le.Uint16(b[2*i:])
		}
		return v
	case ValueInt16:
		v := make([]int16, n)
		for i := range v {
			v[i] = int16(le.Uint16(b[2*i:]))
		}
		return v
	case ValueUint32:
		v := make([]uint32, n)
		for i := range v {
			v[i] = le.Uint32(b[4*i:])
		}
		return v
	case ValueInt32:
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(le.Uint32(b[4*i:]))
		}
		return v
	case ValueFloat32:
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		return v
	case ValueUint64:
		v := make([]uint64, n)
		for i := range v {
			v[i] = le.Uint64(b[8*i:])
		}
		return v
	case ValueInt64:
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(le.Uint64(b[8*i:]))
		}
		return v
	case ValueFloat64:
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		return v
	}
	return nil
}

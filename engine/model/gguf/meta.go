package gguf

import "math"

// Lookup returns the metadata entry for key.
func (f *File) Lookup(key string) (*KV, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return nil, false
	}
	return &f.Metadata[i], true
}

// Has reports whether key is present.
func (f *File) Has(key string) bool { _, ok := f.kvIndex[key]; return ok }

// Architecture is general.architecture, or "" when absent.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return "", false
	}
	s, ok := kv.Value.(string)
	return s, ok
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return false, false
	}
	b, ok := kv.Value.(bool)
	return b, ok
}

// Uint returns an integer value of any integer type that is not negative.
func (f *File) Uint(key string) (uint64, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	return toUint(kv.Value)
}

// Int returns an integer value of any integer type that fits an int64.
func (f *File) Int(key string) (int64, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	return toInt(kv.Value)
}

// Float returns a float32 or float64 value (integers are converted too).
func (f *File) Float(key string) (float64, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	switch v := kv.Value.(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	if i, ok := toInt(kv.Value); ok {
		return float64(i), true
	}
	if u, ok := toUint(kv.Value); ok {
		return float64(u), true
	}
	return 0, false
}

// Array returns an array value.
func (f *File) Array(key string) (*Array, bool) {
	kv, ok := f.Lookup(key)
	if !ok {
		return nil, false
	}
	a, ok := kv.Value.(*Array)
	return a, ok
}

// Strings returns an array of strings, such as tokenizer.ggml.tokens. The
// slice is shared: do not modify it.
func (f *File) Strings(key string) ([]string, bool) {
	a, ok := f.Array(key)
	if !ok {
		return nil, false
	}
	s, ok := a.Values.([]string)
	return s, ok
}

// Float32s returns an array of float32 (shared, do not modify), such as
// tokenizer.ggml.scores. A float64 array is converted.
func (f *File) Float32s(key string) ([]float32, bool) {
	a, ok := f.Array(key)
	if !ok {
		return nil, false
	}
	switch v := a.Values.(type) {
	case []float32:
		return v, true
	case []float64:
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out, true
	}
	return nil, false
}

// Int32s returns an array of int32 (shared, do not modify), such as
// tokenizer.ggml.token_type. Other integer arrays are converted when every
// element fits an int32.
func (f *File) Int32s(key string) ([]int32, bool) {
	a, ok := f.Array(key)
	if !ok {
		return nil, false
	}
	if v, ok := a.Values.([]int32); ok {
		return v, true
	}
	n := a.Len()
	out := make([]int32, n)
	for i := 0; i < n; i++ {
		x, ok := a.Int(i)
		if !ok || x < math.MinInt32 || x > math.MaxInt32 {
			return nil, false
		}
		out[i] = int32(x)
	}
	return out, true
}

// Int returns element i of an integer array as an int64.
func (a *Array) Int(i int) (int64, bool) {
	if i < 0 || i >= a.Len() {
		return 0, false
	}
	switch v := a.Values.(type) {
	case []uint8:
		return int64(v[i]), true
	case []int8:
		return int64(v[i]), true
	case []uint16:
		return int64(v[i]), true
	case []int16:
		return int64(v[i]), true
	case []uint32:
		return int64(v[i]), true
	case []int32:
		return int64(v[i]), true
	case []uint64:
		if v[i] > math.MaxInt64 {
			return 0, false
		}
		return int64(v[i]), true
	case []int64:
		return v[i], true
	}
	return 0, false
}

func toUint(v any) (uint64, bool) {
	switch x := v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	}
	if i, ok := toInt(v); ok && i >= 0 {
		return uint64(i), true
	}
	return 0, false
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
	}
	return 0, false
}

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensorIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

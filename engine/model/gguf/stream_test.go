package gguf

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// WriteStream writes the same bytes as Bytes with the tensors added.
func TestWriteStreamMatchesBytes(t *testing.T) {
	q := make([]byte, 2*34)
	for i := range q {
		q[i] = byte(i * 7)
	}
	f32 := []float32{1, 2, 3, 4, 5}
	for _, align := range []uint32{0, 64} {
		whole := NewBuilder().Set("general.architecture", "llama")
		head := NewBuilder().Set("general.architecture", "llama")
		if align != 0 {
			whole.Set("general.alignment", align)
			head.Set("general.alignment", align)
		}
		whole.AddF32("norm", []uint64{5}, f32)
		head.AddF32("norm", []uint64{5}, f32)
		whole.AddTensor("q", TypeQ8_0, []uint64{32, 2}, q)
		whole.AddF32("tail", []uint64{5}, f32)
		want, err := whole.Bytes()
		require.NoError(t, err)

		var got bytes.Buffer
		err = head.WriteStream(&got, []StreamTensor{
			{Name: "q", Type: TypeQ8_0, Dims: []uint64{32, 2}, Fill: func(dst []byte) error {
				require.Len(t, dst, len(q))
				copy(dst, q)
				return nil
			}},
			{Name: "tail", Type: TypeF32, Dims: []uint64{5}, Fill: func(dst []byte) error {
				copy(dst, whole.tensors[2].data)
				return nil
			}},
		})
		require.NoError(t, err)
		require.Equal(t, want, got.Bytes(), "alignment %d", align)

		f, err := Parse(got.Bytes())
		require.NoError(t, err)
		tq, ok := f.Tensor("q")
		require.True(t, ok)
		require.Equal(t, q, tq.Data)
	}
}

func TestWriteStreamErrors(t *testing.T) {
	fill := func([]byte) error { return nil }
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		ts   []StreamTensor
		want string
	}{
		{"duplicate", []StreamTensor{{"a", TypeF32, []uint64{1}, fill}, {"a", TypeF32, []uint64{1}, fill}}, "duplicate"},
		{"no fill", []StreamTensor{{"a", TypeF32, []uint64{1}, nil}}, "no Fill"},
		{"bad columns", []StreamTensor{{"a", TypeQ8_0, []uint64{31}, fill}}, "multiple of"},
		{"no dims", []StreamTensor{{"a", TypeF32, nil, fill}}, "dims"},
		{"fill fails", []StreamTensor{{"a", TypeF32, []uint64{4}, func([]byte) error { return boom }}}, "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := NewBuilder().WriteStream(&bytes.Buffer{}, tc.ts)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

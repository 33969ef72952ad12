//go:build amd64 && !purego

package ml

// The Q2_K and Q3_K kernels of kquant_low_amd64.s, with the contract of
// the kernels in kquant_amd64.go: Dot4 = four weight rows against one
// activation row, Row4 = one weight row against four activation rows.

//go:noescape
func kqQ2KDot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ3KDot4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ2KRow4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ3KRow4AVX2(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ2KDot4VNNI(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ3KDot4VNNI(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ2KRow4VNNI(w *byte, ws int, a *byte, as int, nb int, out *float32)

//go:noescape
func kqQ3KRow4VNNI(w *byte, ws int, a *byte, as int, nb int, out *float32)

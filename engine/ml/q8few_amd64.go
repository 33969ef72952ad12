//go:build amd64 && !purego

package ml

// q8FewPad turns q8PadRows on (a variable for BenchmarkKQuantFewRows).
var q8FewPad = true

// q8PadRows is the activation row count matmulQ8VNNI runs n rows as. The
// tile kernels for 4 and 8 rows cost less than one for 4 plus one-row
// sweeps for the rest at 3, 6 and 7 rows (BenchmarkKQuantFewRows, Q8_0:
// 3 rows cost about 2.2 one-row products and 4 rows 1.8; 6 or 7 rows 2.1
// to 2.4 and 8 rows 2.1), so those run padded; each row's arithmetic is
// the same in every kernel, so its outputs keep their bits.
func q8PadRows(n int) int {
	if !q8FewPad {
		return n
	}
	switch n {
	case 3:
		return 4
	case 6, 7:
		return 8
	}
	return n
}

// padActRows copies n activation rows of as bytes into buf, followed by
// copies of the last row up to pn rows, and returns buf's first pn rows.
func padActRows(buf, act []byte, n, pn, as int) []byte {
	buf = buf[:pn*as]
	copy(buf, act[:n*as])
	for a := n; a < pn; a++ {
		copy(buf[a*as:(a+1)*as], act[(n-1)*as:n*as])
	}
	return buf
}

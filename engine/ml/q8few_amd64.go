//go:build amd64 && !purego

package ml

// q8FewPad turns q8PadRows on (a variable for BenchmarkKQuantFewRows).
var q8FewPad = true

// q8PadRows is the activation row count matmulQ8VNNI runs n rows as: 3
// rows as 4 and 7 as 8 (the last row repeated), where the 4- or 8-row
// tile kernel costs less than one for 4 rows plus one-row sweeps for the
// rest (BenchmarkKQuantFewRows, Q8_0, two runs: 3 rows 1.84-2.15 one-row
// products against 2.04-2.42, 7 rows 2.26-2.59 against 2.54-3.02; 6 rows
// padded to 8 measured the same as 4+1+1, so it stays). Each row's
// arithmetic is the same in every kernel, so its outputs keep their bits.
func q8PadRows(n int) int {
	if !q8FewPad {
		return n
	}
	switch n {
	case 3:
		return 4
	case 7:
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

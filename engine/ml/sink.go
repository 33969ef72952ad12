package ml

// SoftmaxSink normalizes x in place as Softmax does, with one more logit,
// sink, in the denominator that has no entry of its own (gpt-oss's
// attention sinks: a head may put weight on "nothing").
func SoftmaxSink(x []float32, sink float32) {
	if len(x) == 0 {
		return
	}
	m := max(maxOf(x), sink)
	expShift(x, m)
	sum := expf(sink - m)
	for _, e := range x {
		sum += e
	}
	divBy(x, sum)
}

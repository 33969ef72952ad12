package engine

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// TestPoolStatsCopiesEveryField fills every field of the pool's snapshot
// with a distinct value and checks that PoolStats carries each one under
// the same name: a field added to the pool's Stats fails here until the
// engine's copy has it too.
func TestPoolStatsCopiesEveryField(t *testing.T) {
	var in kvcache.Stats
	v := reflect.ValueOf(&in).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Uint64:
			f.SetUint(uint64(i + 1))
		case reflect.Struct: // the deferred-release histogram
			h := kvcache.NewHistogram([]time.Duration{time.Millisecond, time.Second})
			h.Observe(time.Duration(i+1) * time.Microsecond)
			h.Observe(2 * time.Second)
			f.Set(reflect.ValueOf(h))
		default:
			t.Fatalf("kvcache.Stats.%s: kind %s not covered by this test", v.Type().Field(i).Name, f.Kind())
		}
	}

	out := reflect.ValueOf(poolStatsOf(in))
	require.Equal(t, v.NumField(), out.NumField(), "PoolStats and kvcache.Stats differ in field count")
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		got := out.FieldByName(name)
		require.True(t, got.IsValid(), "PoolStats lacks %s", name)
		want := v.Field(i)
		if h, ok := want.Interface().(kvcache.Histogram); ok {
			g := got.Interface().(Histogram)
			require.Equal(t, Histogram{Bounds: h.Bounds, Counts: h.Counts, Count: h.Count, Sum: h.Sum}, g, name)
			continue
		}
		require.Equal(t, want.Interface(), got.Interface(), name)
	}
}

// TestHistogramSnapshotIsACopy checks that a Stats snapshot shares no
// memory with the engine's live histograms, and that Mean reads it.
func TestHistogramSnapshotIsACopy(t *testing.T) {
	m := newMetrics()
	m.step(3 * time.Millisecond)
	m.step(5 * time.Millisecond)
	st := m.snapshot()
	require.Equal(t, uint64(2), st.StepTime.Count)
	require.Equal(t, 4*time.Millisecond, st.StepTime.Mean())
	require.Zero(t, Histogram{}.Mean())

	st.StepTime.Counts[0] = 99
	st.StepTime.Bounds[0] = time.Hour
	m.step(time.Millisecond)
	again := m.snapshot()
	require.Equal(t, uint64(1), again.StepTime.Counts[0], "snapshot counts alias the live histogram")
	require.Equal(t, time.Millisecond, again.StepTime.Bounds[0], "snapshot bounds alias the live histogram")
	require.Equal(t, time.Millisecond, LatencyBuckets[0])
}

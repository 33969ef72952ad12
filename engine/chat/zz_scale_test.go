package chat

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestZZScale(t *testing.T) {
	files, _ := filepath.Glob("../../../shared/templates/*.jinja")
	for _, f := range files {
		src, _ := os.ReadFile(f)
		tm, err := Parse(string(src))
		if err != nil {
			t.Logf("%s: %v", f, err)
			continue
		}
		for _, n := range []int{1000, 4000} {
			msgs := make([]Message, n)
			for i := range msgs {
				role := "user"
				if i%2 == 1 {
					role = "assistant"
				}
				msgs[i] = Message{Role: role, Content: fmt.Sprintf("message %d with some text", i)}
			}
			st := time.Now()
			out, err := tm.Render(Input{Messages: msgs, AddGenerationPrompt: true, Now: pinned})
			t.Logf("%-60s n=%d %v out=%d err=%v", filepath.Base(f), n, time.Since(st).Round(time.Millisecond), len(out), err)
		}
	}
}

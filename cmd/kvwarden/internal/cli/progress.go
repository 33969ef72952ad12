package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kvwarden/kvwarden/internal/hub"
)

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// ByteProgress renders the progress of a transfer of bytes: on a terminal
// one line redrawn in place (bar, bytes, rate, ETA); otherwise a plain line
// at the start, at every tenth of the total, and at the end, for logs.
type ByteProgress struct {
	W     io.Writer
	TTY   bool
	Label string
	Now   func() time.Time // nil: time.Now

	started    bool
	lastDecile int
	width      int // of the last terminal line, to blank what a shorter one leaves
}

// Update reports done of total bytes (total 0: unknown), counting the rate
// from start over the bytes after resumed.
func (p *ByteProgress) Update(done, total, resumed int64, start time.Time, final bool) {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	el := now().Sub(start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(done-resumed) / el
	}
	if !p.TTY {
		decile := -1
		if total > 0 {
			decile = int(done * 10 / total)
		}
		switch {
		case final:
			fmt.Fprintf(p.W, "%s: done, %s in %.1fs (%s/s)\n", p.Label, FormatSize(done), el, FormatSize(int64(rate)))
		case !p.started:
			p.started = true
			p.lastDecile = max(decile, 0)
			msg := fmt.Sprintf("%s: %s", p.Label, sizeOf(total))
			if resumed > 0 {
				msg += fmt.Sprintf(", resuming at %s", FormatSize(resumed))
			}
			fmt.Fprintln(p.W, msg)
		case decile > p.lastDecile:
			p.lastDecile = decile
			fmt.Fprintf(p.W, "%s: %d%% (%s of %s, %s/s)\n", p.Label, decile*10, FormatSize(done), FormatSize(total), FormatSize(int64(rate)))
		}
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\r%s ", p.Label)
	if total > 0 {
		const bar = 24
		filled := int(done * bar / total)
		fmt.Fprintf(&b, "[%s%s] %3d%% ", strings.Repeat("=", filled), strings.Repeat(" ", bar-filled), done*100/total)
		fmt.Fprintf(&b, "%s / %s", FormatSize(done), FormatSize(total))
	} else {
		fmt.Fprintf(&b, "%s", FormatSize(done))
	}
	if rate > 0 {
		fmt.Fprintf(&b, "  %s/s", FormatSize(int64(rate)))
		if total > 0 && !final {
			eta := time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second)
			fmt.Fprintf(&b, "  ETA %s", eta)
		}
	}
	line := b.String()
	if pad := p.width - len(line); pad > 0 {
		line += strings.Repeat(" ", pad)
	}
	p.width = len(b.String())
	if final {
		line += "\n"
	}
	_, _ = io.WriteString(p.W, line)
}

func sizeOf(total int64) string {
	if total <= 0 {
		return "size unknown"
	}
	return FormatSize(total)
}

// HubProgress adapts a ByteProgress to hub.Client.Progress.
func HubProgress(w io.Writer) func(hub.Progress) {
	var bp *ByteProgress
	return func(p hub.Progress) {
		if bp == nil {
			bp = &ByteProgress{W: w, TTY: IsTerminal(w), Label: p.File}
		}
		bp.Update(p.Done, p.Total, p.Resumed, p.Started, p.Final)
	}
}

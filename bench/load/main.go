// Command load is a bounded loopback load generator for `kvwarden serve`:
// N concurrent clients send POST /v1/completions for T seconds, then it
// reports requests/s, generated tokens/s, p50/p99 latency, the number of
// clean overload answers (429 or 503 with Retry-After) and the number of
// errors (anything else, including a 429 without Retry-After or a 200
// whose body is not a complete completion).
//
//	go run ./bench/load --url http://127.0.0.1:8080 --clients 8 --duration 10s
//
// Below saturation the error count must be 0; above it, overload must show
// up as clean 429s and still no errors. With --stream the requests use
// server-sent events, and the report adds time to first token (p50/p99); a
// stream that ends without `data: [DONE]` counts as an error.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config of a load run.
type Config struct {
	URL       string
	APIKey    string
	Model     string
	Prompt    string
	MaxTokens int
	Clients   int
	Duration  time.Duration
	Timeout   time.Duration // per request
	Stream    bool          // stream: true, measuring time to first token
}

// Report of a load run.
type Report struct {
	Clients      int      `json:"clients"`
	Seconds      float64  `json:"seconds"`
	Requests     int      `json:"requests"`
	OK           int      `json:"ok"`
	Overloaded   int      `json:"overloaded"` // 429/503 with Retry-After
	Errors       int      `json:"errors"`
	Tokens       int      `json:"completion_tokens"`
	RequestsPerS float64  `json:"requests_per_s"`
	TokensPerS   float64  `json:"tokens_per_s"`
	P50ms        float64  `json:"p50_ms"`
	P99ms        float64  `json:"p99_ms"`
	TTFTP50ms    float64  `json:"ttft_p50_ms,omitempty"`
	TTFTP99ms    float64  `json:"ttft_p99_ms,omitempty"`
	FirstErrors  []string `json:"first_errors,omitempty"`
}

func (r Report) String() string {
	return fmt.Sprintf("clients %d, %.1fs: %d requests, %d ok, %d overloaded (429/503), %d errors; %.1f req/s, %.1f tokens/s; latency p50 %.1f ms, p99 %.1f ms",
		r.Clients, r.Seconds, r.Requests, r.OK, r.Overloaded, r.Errors, r.RequestsPerS, r.TokensPerS, r.P50ms, r.P99ms) + r.ttft()
}

func (r Report) ttft() string {
	if r.TTFTP50ms == 0 && r.TTFTP99ms == 0 {
		return ""
	}
	return fmt.Sprintf("; time to first token p50 %.1f ms, p99 %.1f ms", r.TTFTP50ms, r.TTFTP99ms)
}

type completion struct {
	Choices []struct {
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// Run drives the load until cfg.Duration has passed or ctx is done.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Clients < 1 || cfg.Clients > 1024 {
		return Report{}, fmt.Errorf("clients %d: want 1..1024", cfg.Clients)
	}
	if cfg.Duration <= 0 || cfg.Duration > 10*time.Minute {
		return Report{}, fmt.Errorf("duration %v: want (0, 10m]", cfg.Duration)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	body, _ := json.Marshal(map[string]any{"model": cfg.Model, "prompt": cfg.Prompt, "max_tokens": cfg.MaxTokens, "temperature": 0, "stream": cfg.Stream})
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.Clients, MaxConnsPerHost: cfg.Clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: cfg.Timeout}
	url := strings.TrimRight(cfg.URL, "/") + "/v1/completions"

	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var (
		mu   sync.Mutex
		rep  = Report{Clients: cfg.Clients}
		lats []time.Duration
		ttfs []time.Duration
		wg   sync.WaitGroup
	)
	fail := func(msg string) {
		rep.Errors++
		if len(rep.FirstErrors) < 5 {
			rep.FirstErrors = append(rep.FirstErrors, msg)
		}
	}
	start := time.Now()
	for range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				req, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if cfg.APIKey != "" {
					req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
				}
				resp, err := client.Do(req)
				var raw []byte
				var sse streamed
				if err == nil {
					if cfg.Stream && resp.StatusCode == http.StatusOK {
						sse, err = readStream(resp.Body, t0)
					} else {
						raw, err = io.ReadAll(resp.Body)
					}
					resp.Body.Close()
				}
				lat := time.Since(t0)
				mu.Lock()
				rep.Requests++
				switch {
				case err != nil:
					fail(err.Error())
				case resp.StatusCode == http.StatusOK && cfg.Stream:
					if !sse.done {
						fail("stream ended without data: [DONE]")
						break
					}
					rep.OK++
					rep.Tokens += sse.chunks
					lats = append(lats, lat)
					if sse.first > 0 {
						ttfs = append(ttfs, sse.first)
					}
				case resp.StatusCode == http.StatusOK:
					var c completion
					if jerr := json.Unmarshal(raw, &c); jerr != nil || len(c.Choices) != 1 || c.Usage == nil || c.Choices[0].FinishReason == nil {
						fail(fmt.Sprintf("200 with an incomplete body: %.200s", raw))
						break
					}
					rep.OK++
					rep.Tokens += c.Usage.CompletionTokens
					lats = append(lats, lat)
				case (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) && resp.Header.Get("Retry-After") != "":
					rep.Overloaded++
				default:
					fail(fmt.Sprintf("status %d: %.200s", resp.StatusCode, raw))
				}
				overloaded := err == nil && resp.StatusCode != http.StatusOK
				mu.Unlock()
				if overloaded {
					// Back off a little so a saturated server is not hammered
					// in a tight loop; the client does not honour the full
					// Retry-After, which would hide saturation.
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	rep.Seconds = float64(el.Milliseconds()) / 1000
	rep.RequestsPerS = float64(rep.OK) / el.Seconds()
	rep.TokensPerS = float64(rep.Tokens) / el.Seconds()
	slices.Sort(lats)
	rep.P50ms = quantileMS(lats, 0.50)
	rep.P99ms = quantileMS(lats, 0.99)
	slices.Sort(ttfs)
	rep.TTFTP50ms = quantileMS(ttfs, 0.50)
	rep.TTFTP99ms = quantileMS(ttfs, 0.99)
	return rep, nil
}

// streamed is what one server-sent-event response held.
type streamed struct {
	first  time.Duration // first chunk with text, from the request's start
	chunks int           // chunks with text (one token each, or a held-back group)
	done   bool          // saw data: [DONE]
}

func readStream(r io.Reader, t0 time.Time) (streamed, error) {
	var s streamed
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			s.done = true
			continue
		}
		var c completion
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return s, fmt.Errorf("bad event %.100q: %w", data, err)
		}
		if len(c.Choices) > 0 && c.Choices[0].Text != "" {
			if s.chunks == 0 {
				s.first = time.Since(t0)
			}
			s.chunks++
		}
	}
	return s, sc.Err()
}

func quantileMS(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = min(max(i, 0), len(sorted)-1)
	return float64(sorted[i].Microseconds()) / 1000
}

func main() {
	var cfg Config
	var asJSON bool
	flag.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080", "base URL of kvwarden serve")
	flag.StringVar(&cfg.APIKey, "api-key", "", "API key (Bearer)")
	flag.StringVar(&cfg.Model, "model", "", "model name to send (default: none)")
	flag.StringVar(&cfg.Prompt, "prompt", "Once upon a time", "prompt")
	flag.IntVar(&cfg.MaxTokens, "max-tokens", 32, "max_tokens per request")
	flag.IntVar(&cfg.Clients, "clients", 4, "concurrent clients (1..1024)")
	flag.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to run (at most 10m)")
	flag.DurationVar(&cfg.Timeout, "timeout", 60*time.Second, "per-request timeout")
	flag.BoolVar(&asJSON, "json", false, "print the report as JSON")
	flag.BoolVar(&cfg.Stream, "stream", false, "stream responses (SSE) and report time to first token")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(2)
	}
	if asJSON {
		_ = json.NewEncoder(os.Stdout).Encode(rep)
	} else {
		fmt.Println(rep)
		for _, e := range rep.FirstErrors {
			fmt.Println("  error:", e)
		}
	}
	if rep.Errors > 0 {
		os.Exit(1)
	}
}

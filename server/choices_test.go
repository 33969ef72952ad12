package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/model"
)

// chatLP is a chat response's choice with its logprobs, as a client reads it.
type chatLP struct {
	Index   int `json:"index"`
	Message struct {
		Content string `json:"content"`
	} `json:"message"`
	Delta struct {
		Role    string  `json:"role"`
		Content *string `json:"content"`
	} `json:"delta"`
	Logprobs *struct {
		Content []struct {
			Token       string  `json:"token"`
			Logprob     float64 `json:"logprob"`
			Bytes       []int   `json:"bytes"`
			TopLogprobs []struct {
				Token   string  `json:"token"`
				Logprob float64 `json:"logprob"`
				Bytes   []int   `json:"bytes"`
			} `json:"top_logprobs"`
		} `json:"content"`
	} `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type chatLPResponse struct {
	Choices []chatLP `json:"choices"`
	Usage   *usage   `json:"usage"`
}

// legacyLP is a completions choice with its logprobs.
type legacyLP struct {
	Index    int    `json:"index"`
	Text     string `json:"text"`
	Logprobs *struct {
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []*float64           `json:"token_logprobs"`
		TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		TextOffset    []int                `json:"text_offset"`
	} `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type legacyLPResponse struct {
	Choices []legacyLP `json:"choices"`
	Usage   *usage     `json:"usage"`
}

var userHi = []map[string]any{{"role": "user", "content": "Tell me a story."}}

// postOK posts body and decodes a 200 answer into out.
func postOK(t *testing.T, ts *testServer, path string, body map[string]any, out any) {
	t.Helper()
	resp, raw := ts.post(t, path, "", body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
}

// postStream posts body with stream: true and returns its chunks.
func postStream(t *testing.T, ts *testServer, path string, body map[string]any) []json.RawMessage {
	t.Helper()
	b := map[string]any{"stream": true}
	for k, v := range body {
		b[k] = v
	}
	resp, raw := ts.post(t, path, "", b)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var chunks []json.RawMessage
	done := false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		require.False(t, done, "data after [DONE]")
		if data == "[DONE]" {
			done = true
			continue
		}
		chunks = append(chunks, json.RawMessage(data))
	}
	require.True(t, done, "the stream ends with [DONE]")
	return chunks
}

func byteString(b []int) string {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = byte(c)
	}
	return string(out)
}

// TestChatLogprobs: logprobs are <= 0, top_logprobs sorted best first and
// headed by the sampled token at temperature 0, bytes spell the content;
// the stream carries the same records, one chunk per token.
func TestChatLogprobs(t *testing.T) {
	ts := start(t, setup{})
	body := map[string]any{"messages": userHi, "max_tokens": 12, "temperature": 0, "logprobs": true, "top_logprobs": 4}
	var r chatLPResponse
	postOK(t, ts, "/v1/chat/completions", body, &r)
	require.Len(t, r.Choices, 1)
	c := r.Choices[0]
	require.NotNil(t, c.Logprobs)
	require.Len(t, c.Logprobs.Content, r.Usage.CompletionTokens)
	var spelled strings.Builder
	for i, e := range c.Logprobs.Content {
		require.LessOrEqual(t, e.Logprob, 0.0, "token %d", i)
		require.Len(t, e.TopLogprobs, 4)
		require.Equal(t, e.Token, e.TopLogprobs[0].Token, "greedy samples the top token (%d)", i)
		require.Equal(t, e.Logprob, e.TopLogprobs[0].Logprob)
		for j := 1; j < len(e.TopLogprobs); j++ {
			require.GreaterOrEqual(t, e.TopLogprobs[j-1].Logprob, e.TopLogprobs[j].Logprob)
			require.LessOrEqual(t, e.TopLogprobs[j].Logprob, 0.0)
		}
		spelled.WriteString(byteString(e.Bytes))
	}
	require.Equal(t, c.Message.Content, strings.ToValidUTF8(spelled.String(), "\uFFFD"))

	// Streamed: the same records, spread over the chunks, each chunk
	// carrying the tokens of its text.
	chunks := postStream(t, ts, "/v1/chat/completions", body)
	var streamed []string
	var text strings.Builder
	for _, ch := range chunks {
		var cr chatLPResponse
		require.NoError(t, json.Unmarshal(ch, &cr))
		for _, cc := range cr.Choices {
			if cc.Delta.Content != nil {
				text.WriteString(*cc.Delta.Content)
			}
			if cc.Logprobs == nil {
				continue
			}
			require.NotEmpty(t, cc.Logprobs.Content, "a chunk with logprobs has tokens")
			var piece strings.Builder
			for _, e := range cc.Logprobs.Content {
				streamed = append(streamed, e.Token)
				piece.WriteString(byteString(e.Bytes))
			}
			require.Equal(t, *cc.Delta.Content, strings.ToValidUTF8(piece.String(), "\uFFFD"))
		}
	}
	var want []string
	for _, e := range c.Logprobs.Content {
		want = append(want, e.Token)
	}
	require.Equal(t, want, streamed)
	require.Equal(t, c.Message.Content, text.String())
}

// TestCompletionLogprobs: the legacy shape, with echo: the prompt's tokens
// come first, the first with null, and the text starts with the prompt.
func TestCompletionLogprobs(t *testing.T) {
	ts := start(t, setup{})
	const prompt = "Once upon a time"
	var r legacyLPResponse
	postOK(t, ts, "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 6, "temperature": 0, "logprobs": 2}, &r)
	lp := r.Choices[0].Logprobs
	require.NotNil(t, lp)
	n := r.Usage.CompletionTokens
	require.Len(t, lp.Tokens, n)
	require.Len(t, lp.TokenLogprobs, n)
	require.Len(t, lp.TopLogprobs, n)
	require.Len(t, lp.TextOffset, n)
	for i := range n {
		require.NotNil(t, lp.TokenLogprobs[i])
		require.LessOrEqual(t, *lp.TokenLogprobs[i], 0.0)
		top := lp.TopLogprobs[i]
		require.LessOrEqual(t, len(top), 3, "logprobs alternatives plus the sampled token")
		require.Equal(t, *lp.TokenLogprobs[i], top[lp.Tokens[i]], "the sampled token is among them")
		for _, v := range top {
			require.LessOrEqual(t, v, *lp.TokenLogprobs[i], "greedy: nothing beats the sampled token")
		}
		if i > 0 {
			require.GreaterOrEqual(t, lp.TextOffset[i], lp.TextOffset[i-1])
		}
	}
	require.Zero(t, lp.TextOffset[0])
	plain := r.Choices[0].Text

	// echo, with logprobs: prompt tokens (BOS included) first.
	var e legacyLPResponse
	postOK(t, ts, "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 6, "temperature": 0, "logprobs": 1, "echo": true}, &e)
	require.Equal(t, prompt+plain, e.Choices[0].Text)
	elp := e.Choices[0].Logprobs
	np := e.Usage.PromptTokens
	require.Len(t, elp.Tokens, np+n)
	require.Nil(t, elp.TokenLogprobs[0], "nothing predicts the first token")
	require.Nil(t, elp.TopLogprobs[0])
	for i := 1; i < np+n; i++ {
		require.NotNil(t, elp.TokenLogprobs[i], "token %d", i)
		require.LessOrEqual(t, *elp.TokenLogprobs[i], 0.0)
		require.LessOrEqual(t, len(elp.TopLogprobs[i]), 2)
	}
	require.Equal(t, lp.Tokens, elp.Tokens[np:], "the generated part is unchanged")
	require.Equal(t, runeCount(prompt), elp.TextOffset[np], "generated offsets count the echoed prompt")

	// echo without logprobs, streamed: the prompt is the first chunk.
	chunks := postStream(t, ts, "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 6, "temperature": 0, "echo": true})
	var first legacyLPResponse
	require.NoError(t, json.Unmarshal(chunks[0], &first))
	require.Equal(t, prompt, first.Choices[0].Text)
	text, finish := streamText(t, decodeChunks(t, chunks), false)
	require.Equal(t, prompt+plain, text)
	require.Equal(t, "length", finish)

	// Streamed with logprobs and echo: the same records as the answer.
	chunks = postStream(t, ts, "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 6, "temperature": 0, "logprobs": 1, "echo": true})
	var toks []string
	var offs []int
	for _, ch := range chunks {
		var cr legacyLPResponse
		require.NoError(t, json.Unmarshal(ch, &cr))
		for _, c := range cr.Choices {
			if c.Logprobs != nil {
				toks = append(toks, c.Logprobs.Tokens...)
				offs = append(offs, c.Logprobs.TextOffset...)
			}
		}
	}
	require.Equal(t, elp.Tokens, toks)
	require.Equal(t, elp.TextOffset, offs)
}

func decodeChunks(t *testing.T, chunks []json.RawMessage) []map[string]any {
	t.Helper()
	out := make([]map[string]any, len(chunks))
	for i, c := range chunks {
		require.NoError(t, json.Unmarshal(c, &out[i]))
	}
	return out
}

// TestNChoices: n choices with indices 0..n-1, distinct at temperature > 0,
// choice i being the request with seed+i; the later choices find the
// prompt's pages in the prefix cache of the same tenant only; streamed
// chunks carry their index and each choice its own finish_reason.
func TestNChoices(t *testing.T) {
	ts := start(t, setup{keys: keyA + " tenant-a\n" + keyB + " tenant-b\n"})
	prompt := strings.Repeat("The quick brown fox. ", 4) // 85 tokens: 5 full pages of 16
	body := map[string]any{"prompt": prompt, "max_tokens": 12, "temperature": 1, "seed": 5, "n": 3}
	post := func(key string, body map[string]any, out any) {
		resp, raw := ts.post(t, "/v1/completions", key, body)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
		require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
	}
	hits := ts.eng.Stats().PrefixHits
	var r legacyLPResponse
	post(keyA, body, &r)
	require.Len(t, r.Choices, 3)
	seen := map[string]bool{}
	total := 0
	for i, c := range r.Choices {
		require.Equal(t, i, c.Index)
		require.Equal(t, "length", *c.FinishReason)
		require.False(t, seen[c.Text], "choice %d repeats another: %q", i, c.Text)
		seen[c.Text] = true
		total += 12
	}
	require.Equal(t, total, r.Usage.CompletionTokens)
	require.Equal(t, 85, r.Usage.PromptTokens, "the prompt counts once (BOS and 84 bytes)")
	require.GreaterOrEqual(t, ts.eng.Stats().PrefixHits-hits, uint64(2*5), "choices 1 and 2 share the prompt's 5 full pages")

	// Choice i is the request with seed 5+i.
	var one legacyLPResponse
	post(keyA, map[string]any{"prompt": prompt, "max_tokens": 12, "temperature": 1, "seed": 6}, &one)
	require.Equal(t, r.Choices[1].Text, one.Choices[0].Text)

	// Another tenant never hits tenant a's pages.
	var b legacyLPResponse
	post(keyB, body, &b)
	require.Zero(t, b.Usage.PromptTokensDetails.CachedTokens, "no cross-tenant prefix hit")
	for i := range b.Choices {
		require.Equal(t, r.Choices[i].Text, b.Choices[i].Text, "same seeds, same outputs")
	}

	// Streamed: per-index texts equal the answer's; each index ends once.
	b2 := map[string]any{"stream": true}
	for k, v := range body {
		b2[k] = v
	}
	resp, raw := ts.post(t, "/v1/completions", keyA, b2)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	events, done := sse(t, bytes.NewReader(raw))
	require.True(t, done)
	texts := make([]strings.Builder, 3)
	finishes := make([]int, 3)
	for _, ev := range events {
		for _, c := range ev["choices"].([]any) {
			cm := c.(map[string]any)
			i := int(cm["index"].(float64))
			require.Less(t, i, 3)
			texts[i].WriteString(cm["text"].(string))
			if _, ok := cm["finish_reason"].(string); ok {
				finishes[i]++
			}
		}
	}
	for i := range 3 {
		require.Equal(t, r.Choices[i].Text, texts[i].String(), "choice %d", i)
		require.Equal(t, 1, finishes[i], "choice %d", i)
	}

	// Chat: n choices, each opened with the assistant role.
	chunks := postStreamKey(t, ts, "/v1/chat/completions", keyA, map[string]any{"messages": userHi, "max_tokens": 4, "temperature": 1, "seed": 1, "n": 2})
	roles := map[int]int{}
	for _, ch := range chunks {
		var cr chatLPResponse
		require.NoError(t, json.Unmarshal(ch, &cr))
		for _, c := range cr.Choices {
			if c.Delta.Role == "assistant" {
				roles[c.Index]++
			}
		}
	}
	require.Equal(t, map[int]int{0: 1, 1: 1}, roles)
}

const keyA, keyB = "key-tenant-a-0123", "key-tenant-b-0123"

func postStreamKey(t *testing.T, ts *testServer, path, key string, body map[string]any) []json.RawMessage {
	t.Helper()
	b := map[string]any{"stream": true}
	for k, v := range body {
		b[k] = v
	}
	resp, raw := ts.post(t, path, key, b)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	events, done := sse(t, bytes.NewReader(raw))
	require.True(t, done)
	out := make([]json.RawMessage, len(events))
	for i, ev := range events {
		out[i], _ = json.Marshal(ev)
	}
	return out
}

// TestPenaltiesOracle checks presence_penalty and frequency_penalty through
// the server against their formula: at temperature 0 each token must be
// the argmax of logprob - count*frequency - (count > 0)*presence over the
// model's top 20 alternatives (the raw logprobs differ from the logits by
// one constant per step), counting the tokens generated before it.
func TestPenaltiesOracle(t *testing.T) {
	ts := start(t, setup{})
	run := func(pres, freq float64) chatLP {
		var r chatLPResponse
		postOK(t, ts, "/v1/chat/completions", map[string]any{"messages": userHi, "max_tokens": 16, "temperature": 0,
			"logprobs": true, "top_logprobs": 20, "presence_penalty": pres, "frequency_penalty": freq}, &r)
		return r.Choices[0]
	}
	plain := run(0, 0)
	for _, pf := range [][2]float64{{0, 1.5}, {1.2, 0}, {0.5, 0.7}} {
		c := run(pf[0], pf[1])
		count := map[string]int{}
		for i, e := range c.Logprobs.Content {
			best, bestV := "", math.Inf(-1)
			for _, a := range e.TopLogprobs {
				k := byteString(a.Bytes)
				v := a.Logprob
				if n := count[k]; n > 0 {
					v -= float64(n)*pf[1] + pf[0]
				}
				if v > bestV {
					best, bestV = k, v
				}
			}
			require.Equal(t, best, byteString(e.Bytes), "penalties %v, token %d", pf, i)
			count[byteString(e.Bytes)]++
		}
		if pf[1] > 0 {
			// (A presence penalty applies once: the built-in model's best
			// token may stay best, as the oracle above checks.)
			require.NotEqual(t, plain.Message.Content, c.Message.Content, "penalties %v change the greedy output", pf)
		}
	}
}

// TestLogitBias: -100 bans the greedy token, +100 forces a token at a high
// temperature; bad values are a 400 naming logit_bias.
func TestLogitBias(t *testing.T) {
	ts := start(t, setup{})
	greedy := func(bias map[string]any) []int {
		var r chatLPResponse
		postOK(t, ts, "/v1/chat/completions", map[string]any{"messages": userHi, "max_tokens": 1, "temperature": 0, "logprobs": true,
			"logit_bias": bias}, &r)
		return r.Choices[0].Logprobs.Content[0].Bytes
	}
	first := greedy(nil)
	require.Len(t, first, 1, "the built-in model's tokens are bytes")
	id := model.SyntheticByteOffset + first[0]
	require.NotEqual(t, first, greedy(map[string]any{fmt.Sprint(id): -100}))

	forced := model.SyntheticByteOffset + int('q')
	var f legacyLPResponse
	postOK(t, ts, "/v1/completions", map[string]any{"prompt": "Hello", "max_tokens": 10, "temperature": 1.8, "seed": 3,
		"logit_bias": map[string]any{fmt.Sprint(forced): 100}}, &f)
	require.Equal(t, strings.Repeat("q", 10), f.Choices[0].Text)
}

func TestChoiceParamErrors(t *testing.T) {
	ts := start(t, setup{echo: true})
	chat := `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct{ name, path, body, param string }{
		{"n zero", "/v1/completions", `{"prompt":"a","n":0}`, "n"},
		{"n too many", "/v1/chat/completions", `{` + chat + `,"n":200}`, "n"},
		{"presence above", "/v1/completions", `{"prompt":"a","presence_penalty":2.5}`, "presence_penalty"},
		{"frequency below", "/v1/chat/completions", `{` + chat + `,"frequency_penalty":-3}`, "frequency_penalty"},
		{"bias key", "/v1/completions", `{"prompt":"a","logit_bias":{"abc":1}}`, "logit_bias"},
		{"bias negative key", "/v1/completions", `{"prompt":"a","logit_bias":{"-4":1}}`, "logit_bias"},
		{"bias value", "/v1/completions", `{"prompt":"a","logit_bias":{"5":150}}`, "logit_bias"},
		{"bias value type", "/v1/chat/completions", `{` + chat + `,"logit_bias":{"5":"x"}}`, "logit_bias"},
		{"bias outside vocab", "/v1/completions", `{"prompt":"a","logit_bias":{"99999":1}}`, "logit_bias"},
		{"logprobs too many", "/v1/completions", `{"prompt":"a","logprobs":21}`, "logprobs"},
		{"logprobs type", "/v1/completions", `{"prompt":"a","logprobs":"yes"}`, "logprobs"},
		{"top_logprobs too many", "/v1/chat/completions", `{` + chat + `,"logprobs":true,"top_logprobs":21}`, "top_logprobs"},
		{"top_logprobs negative", "/v1/chat/completions", `{` + chat + `,"logprobs":true,"top_logprobs":-1}`, "top_logprobs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, raw := ts.post(t, c.path, "", c.body)
			e := requireAPIError(t, resp, raw, http.StatusBadRequest, "")
			require.NotNil(t, e.Error.Param, "%s", raw)
			require.Equal(t, c.param, *e.Error.Param)
			require.Contains(t, e.Error.Message, c.param)
		})
	}
	require.Zero(t, ts.eng.Stats().Pool.Allocs, "no rejected request reaches the pool")
}

// TestOneChunkPerToken counts the chunks of streams against their tokens:
// one per token for ASCII, one per character when each character takes
// two tokens (bytes), with logprobs or without.
func TestOneChunkPerToken(t *testing.T) {
	ts := start(t, setup{echo: true})
	for _, tc := range []struct {
		name, text string
		perChunk   int
	}{{"ascii", "abc", 1}, {"two-byte characters", "éü", 2}} {
		for _, lp := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s logprobs %v", tc.name, lp), func(t *testing.T) {
				const n = 20
				body := map[string]any{"prompt": tokPrompt(tc.text), "max_tokens": n, "temperature": 0}
				if lp {
					body["logprobs"] = 0
				}
				events, _ := sse(t, bytes.NewReader(mustStream(t, ts, body)))
				pieces := 0
				var text strings.Builder
				for _, ev := range events {
					for _, c := range ev["choices"].([]any) {
						cm := c.(map[string]any)
						if s := cm["text"].(string); s != "" {
							pieces++
							text.WriteString(s)
							require.Equal(t, 1, runeCount(s), "one character per chunk: %q", s)
							if lp {
								toks := cm["logprobs"].(map[string]any)["tokens"].([]any)
								require.Len(t, toks, tc.perChunk)
							}
						}
					}
				}
				require.Equal(t, echoed(tc.text, n), text.String())
				require.Equal(t, n/tc.perChunk, pieces)
			})
		}
	}
}

func mustStream(t *testing.T, ts *testServer, body map[string]any) []byte {
	t.Helper()
	body["stream"] = true
	resp, raw := ts.post(t, "/v1/completions", "", body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	return raw
}

// TestSlowReaderDoesNotStall: a stream nobody reads does not hold up other
// requests (the engine queues its events; only its handler waits on the
// connection), and it is complete once read.
func TestSlowReaderDoesNotStall(t *testing.T) {
	ts := start(t, setup{echo: true, cfg: engine.Config{MaxContext: 512, KVPages: 64}})
	raw, err := json.Marshal(map[string]any{"prompt": tokPrompt("slow"), "max_tokens": 400, "temperature": 0, "stream": true})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, ts.url+"/v1/completions", bytes.NewReader(raw))
	require.NoError(t, err)
	resp, err := ts.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	// Read nothing yet; other requests complete meanwhile.
	for i := range 3 {
		var r legacyLPResponse
		postOK(t, ts, "/v1/completions", map[string]any{"prompt": tokPrompt(fmt.Sprint("fast", i)), "max_tokens": 50, "temperature": 0}, &r)
		require.Equal(t, echoed(fmt.Sprint("fast", i), 50), r.Choices[0].Text)
	}
	events, done := sse(t, resp.Body)
	require.True(t, done)
	text, _ := streamText(t, events, false)
	require.Equal(t, echoed("slow", 400), text)
	require.Len(t, events, 400+1, "one chunk per token, then the finish")
}

// TestChoicesDisconnectAborts: a client that leaves a streamed n > 1
// request mid-stream aborts every choice and leaves no page held.
func TestChoicesDisconnectAborts(t *testing.T) {
	ts := start(t, setup{echo: true, delay: 2 * time.Millisecond})
	raw, err := json.Marshal(map[string]any{"prompt": tokPrompt("xyz"), "max_tokens": 200, "stream": true, "n": 3, "logprobs": 1})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/v1/completions", bytes.NewReader(raw))
	require.NoError(t, err)
	resp, err := ts.client.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "data: "))
	cancel()
	resp.Body.Close()
	require.Eventually(t, func() bool { return ts.eng.Stats().Finished["abort"] == 3 }, 5*time.Second, 10*time.Millisecond,
		"every choice is aborted")
	requireNoPageLeaks(t, ts.eng)
}

// TestChoicesWithResponseFormat: every choice of an n > 1 request keeps
// the request's constraint (each gets its own grammar state).
func TestChoicesWithResponseFormat(t *testing.T) {
	ts := start(t, setup{cfg: engine.Config{MaxContext: 512}})
	var r chatLPResponse
	postOK(t, ts, "/v1/chat/completions", map[string]any{"messages": userHi, "max_tokens": 200, "temperature": 1, "seed": 9, "n": 3,
		"response_format": map[string]any{"type": "json_object"}, "logprobs": true}, &r)
	require.Len(t, r.Choices, 3)
	for i, c := range r.Choices {
		require.Equal(t, i, c.Index)
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(c.Message.Content), &obj), "choice %d: %q", i, c.Message.Content)
		require.Equal(t, "stop", *c.FinishReason)
		require.NotEmpty(t, c.Logprobs.Content)
	}
}

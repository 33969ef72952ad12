package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
)

// choiceJSON is one choice of a chat answer, streamed (added up) or not.
type choiceJSON struct {
	msg      chatMessageJSON
	finish   string
	logprobs int // token records, over all chunks
}

// chatChoices reads a non-streamed chat answer with several choices.
func chatChoices(t *testing.T, raw []byte) (map[int]*choiceJSON, int) {
	t.Helper()
	var out struct {
		Choices []struct {
			Index        int             `json:"index"`
			Message      chatMessageJSON `json:"message"`
			FinishReason string          `json:"finish_reason"`
			Logprobs     *struct {
				Content []json.RawMessage `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
	res := map[int]*choiceJSON{}
	for _, c := range out.Choices {
		cj := &choiceJSON{msg: c.Message, finish: c.FinishReason}
		if c.Logprobs != nil {
			cj.logprobs = len(c.Logprobs.Content)
		}
		res[c.Index] = cj
	}
	return res, out.Usage.CompletionTokens
}

// streamChoices adds up a chat stream's deltas per choice index, as a
// client does (streamResult's checks, per choice), and returns the usage's
// completion tokens (the stream must ask for include_usage).
func streamChoices(t *testing.T, raw []byte) (map[int]*choiceJSON, int) {
	t.Helper()
	events, done := sse(t, strings.NewReader(string(raw)))
	require.True(t, done, "%s", raw)
	res := map[int]*choiceJSON{}
	content, reasoning := map[int]string{}, map[int]string{}
	tokens := 0
	for _, ev := range events {
		b, _ := json.Marshal(ev)
		var chunk struct {
			Choices []struct {
				Index        int             `json:"index"`
				Delta        chatMessageJSON `json:"delta"`
				FinishReason *string         `json:"finish_reason"`
				Logprobs     *struct {
					Content []json.RawMessage `json:"content"`
				} `json:"logprobs"`
			} `json:"choices"`
			Usage *usage `json:"usage"`
		}
		require.NoError(t, json.Unmarshal(b, &chunk))
		if chunk.Usage != nil {
			tokens = chunk.Usage.CompletionTokens
		}
		for _, c := range chunk.Choices {
			cj := res[c.Index]
			if cj == nil {
				cj = &choiceJSON{}
				res[c.Index] = cj
			}
			require.Empty(t, cj.finish, "chunk after choice %d finished: %s", c.Index, b)
			content[c.Index] += str(c.Delta.Content)
			reasoning[c.Index] += str(c.Delta.ReasoningContent)
			if c.Logprobs != nil {
				cj.logprobs += len(c.Logprobs.Content)
			}
			for _, tc := range c.Delta.ToolCalls {
				require.NotNil(t, tc.Index, "%s", b)
				if *tc.Index == len(cj.msg.ToolCalls) {
					require.NotEmpty(t, tc.ID, "%s", b)
					require.Equal(t, "function", tc.Type)
					require.NotEmpty(t, tc.Function.Name)
					cj.msg.ToolCalls = append(cj.msg.ToolCalls, tc)
					continue
				}
				require.Less(t, *tc.Index, len(cj.msg.ToolCalls))
				require.Empty(t, tc.Function.Name, "the name comes once")
				cj.msg.ToolCalls[*tc.Index].Function.Arguments += tc.Function.Arguments
			}
			if c.FinishReason != nil {
				cj.finish = *c.FinishReason
			}
		}
	}
	for i, cj := range res {
		c, r := content[i], reasoning[i]
		cj.msg.Content, cj.msg.ReasoningContent = &c, &r
	}
	return res, tokens
}

// TestToolChoicesMulti: tools with n > 1 and logprobs go through the
// choices path, and each choice is parsed on its own: a named tool_choice
// on the random model at temperature > 0 gives every choice a valid call
// of that tool with finish_reason "tool_calls", streamed (deltas naming
// their choice) and not; with logprobs each choice has its tokens' records
// (streamed, spread over its chunks), one per generated token.
func TestToolChoicesMulti(t *testing.T) {
	ts := start(t, setup{cfg: engine.Config{MaxContext: 1024, KVPages: 256}})
	validators := map[string]*jsonschema.Schema{}
	for name, sc := range weatherSchemas {
		validators[name] = schemaValidator(t, sc)
	}
	for _, c := range []struct {
		name     string
		n        int
		logprobs bool
	}{
		{"n=2", 2, false},
		{"n=2/logprobs", 2, true},
		{"n=1/logprobs", 1, true},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", c.name, stream), func(t *testing.T) {
				body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":%s,`+
					`"tool_choice":{"type":"function","function":{"name":"get_weather"}},"temperature":0.8,"seed":4,"max_tokens":300,`+
					`"n":%d,"logprobs":%v,"top_logprobs":%d,"stream":%v,"stream_options":%s}`,
					weatherTools, c.n, c.logprobs, map[bool]int{true: 2}[c.logprobs], stream, map[bool]string{true: `{"include_usage":true}`, false: "null"}[stream])
				resp, raw := ts.post(t, "/v1/chat/completions", "", body)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
				var got map[int]*choiceJSON
				var tokens int
				if stream {
					got, tokens = streamChoices(t, raw)
				} else {
					got, tokens = chatChoices(t, raw)
				}
				require.Len(t, got, c.n, "%s", raw)
				records := 0
				for i := range c.n {
					ch := got[i]
					require.NotNil(t, ch, "choice %d: %s", i, raw)
					require.Equal(t, "tool_calls", ch.finish, "choice %d: %s", i, raw)
					require.Empty(t, str(ch.msg.Content), "choice %d: %s", i, raw)
					require.NotEmpty(t, ch.msg.ToolCalls, "choice %d: %s", i, raw)
					for _, tc := range ch.msg.ToolCalls {
						require.Equal(t, "get_weather", tc.Function.Name)
						require.True(t, strings.HasPrefix(tc.ID, "call_"), tc.ID)
						requireValid(t, validators[tc.Function.Name], tc.Function.Arguments)
					}
					records += ch.logprobs
				}
				if c.logprobs {
					require.Equal(t, tokens, records, "one record per generated token: %s", raw)
				} else {
					require.Zero(t, records)
				}
			})
		}
	}
}

// TestReasoningChoices: with n > 1 and logprobs, each choice's <think>
// block goes to its reasoning_content, streamed and not.
func TestReasoningChoices(t *testing.T) {
	ts := scripted(t, "Qwen-Qwen3-0.6B.jinja")
	out := "<think>\nThe user greets me.\n</think>\n\nHello there!"
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":200,"n":2,"logprobs":true,"stream":%v,"grammar":%s}`,
				stream, literal(t, out))
			resp, raw := ts.post(t, "/v1/chat/completions", "", body)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
			var got map[int]*choiceJSON
			if stream {
				got, _ = streamChoices(t, raw)
			} else {
				got, _ = chatChoices(t, raw)
			}
			require.Len(t, got, 2)
			for i := range 2 {
				require.Equal(t, "The user greets me.", str(got[i].msg.ReasoningContent), "choice %d: %s", i, raw)
				require.Equal(t, "Hello there!", str(got[i].msg.Content), "choice %d: %s", i, raw)
				require.Equal(t, "stop", got[i].finish)
				require.Positive(t, got[i].logprobs)
			}
		})
	}
}

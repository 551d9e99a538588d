package server

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		key    string
	}{
		{"dc", func(c *Config) { c.DC = "a.b" }, "dc"},
		{"dp size", func(c *Config) { c.DPSize = -1 }, "dp_size"},
		{"heartbeat", func(c *Config) { c.HeartbeatInterval = -time.Second }, "heartbeat_interval"},
		{"card", func(c *Config) { c.CardInterval = -time.Second }, "card_interval"},
		{"output cap", func(c *Config) { c.MaxOutputTokens = 2; c.DefaultMaxTokens = 3 }, "max_output_tokens"},
		{"endpoint", func(c *Config) { c.EndpointURL = "ftp://x" }, "endpoint_url"},
		{"engine", func(c *Config) { c.Engine.SpeedUp = -1 }, "engine"},
		{"protocol", func(c *Config) { c.Protocol = "sglang" }, "protocol"},
		{"kv events endpoint", func(c *Config) { c.Protocol = ProtocolVLLM; c.KVEventsEndpoint = "ipc:///tmp/x" }, "kv_events_endpoint"},
		{"replay endpoint", func(c *Config) { c.Protocol = ProtocolVLLM; c.ReplayEndpoint = "tcp://127.0.0.1" }, "replay_endpoint"},
		{"unknown role", func(c *Config) { c.Role = "prefil" }, "role"},
		{"bootstrap port of a decode engine", func(c *Config) { c.Role, c.BootstrapPort = "decode", 8998 }, "bootstrap_port"},
		{"bootstrap port range", func(c *Config) { c.Role, c.BootstrapPort = "prefill", 70000 }, "bootstrap_port"},
		{"replay port past the last rank", func(c *Config) {
			c.Protocol, c.DPSize, c.ReplayEndpoint = ProtocolVLLM, 2, "tcp://127.0.0.1:65535"
		}, "replay_endpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			tc.mutate(&c)
			c.EnsureDefaults()
			err := c.Validate()
			if !errors.Is(err, ErrConfig) || !containsKey(err.Error(), tc.key) {
				t.Fatalf("err = %v, want ErrConfig naming %s", err, tc.key)
			}
		})
	}
	c := Config{}
	if err := c.EnsureDefaults().Validate(); err != nil || c.EngineID == 0 || c.DC != DefaultDC {
		t.Fatalf("defaults: %v %+v", err, c)
	}
}

func containsKey(msg, key string) bool {
	for i := 0; i+len(key) <= len(msg); i++ {
		if msg[i:i+len(key)] == key {
			return true
		}
	}
	return false
}

func TestTextTokens(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []uint32
	}{
		{"empty", "", []uint32{}},
		{"one word", "abcd", []uint32{0x64636261}},
		{"padded tail", "abcde", []uint32{0x64636261, 0x65}},
		{"utf8 bytes", "é", []uint32{0xa9c3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := TextTokens(tc.in); !slices.Equal(got, tc.want) {
				t.Fatalf("TextTokens(%q) = %x, want %x", tc.in, got, tc.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	lim := limits{def: 16, max: 100}
	tests := []struct {
		name    string
		chat    bool
		body    string
		tokens  []uint32
		max     int
		limited bool
		err     bool
	}{
		{"completion ids", false, `{"prompt":[1,2,3],"max_tokens":5}`, []uint32{1, 2, 3}, 5, true, false},
		{"completion nested ids", false, `{"prompt":[[4,5]]}`, []uint32{4, 5}, 16, false, false},
		{"completion one string", false, `{"prompt":["abcd"]}`, []uint32{0x64636261}, 16, false, false},
		{"completion capped", false, `{"prompt":"abcd","max_tokens":1000}`, []uint32{0x64636261}, 100, true, false},
		{"completion extension wins", false, `{"prompt":"abcd","kvrouter":{"token_ids":[9]}}`, []uint32{9}, 16, false, false},
		{"completion float id", false, `{"prompt":[1.5]}`, nil, 0, false, true},
		{"completion null prompt", false, `{"prompt":null}`, nil, 0, false, true},
		{"chat text", true, `{"messages":[{"role":"user","content":"hi"}]}`, TextTokens("<|user|>\nhi\n"), 16, false, false},
		{"chat parts", true, `{"messages":[{"role":"user","content":[{"type":"text","text":"h"},{"type":"image_url"},{"type":"text","text":"i"}]}]}`, TextTokens("<|user|>\nhi\n"), 16, false, false},
		{"chat ids", true, `{"messages":[{"role":"user","content":"x"}],"kvrouter":{"token_ids":[7,8]},"max_completion_tokens":3,"max_tokens":9}`, []uint32{7, 8}, 3, true, false},
		{"chat no role", true, `{"messages":[{"content":"x"}]}`, nil, 0, false, true},
		{"chat bad content", true, `{"messages":[{"role":"user","content":5}]}`, nil, 0, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parse := parseCompletion
			if tc.chat {
				parse = parseChat
			}
			g, err := parse([]byte(tc.body), lim)
			if tc.err {
				if !errors.Is(err, ErrRequest) {
					t.Fatalf("err = %v, want ErrRequest", err)
				}
				return
			}
			if err != nil || !slices.Equal(g.tokens, tc.tokens) || g.maxTokens != tc.max || g.limited != tc.limited || g.chat != tc.chat {
				t.Fatalf("got %+v err %v", g, err)
			}
		})
	}
}

// TestDispatchPacing drives dispatch with synthetic step results: tokens
// are credited per iteration after the first token, never reach MaxTokens
// before the completion, pause across a preemption and end exact.
func TestDispatchPacing(t *testing.T) {
	r := &rank{reqs: map[string]*pending{}}
	p := newPending("a", 5)
	r.reqs["a"] = p
	r.inflight.Store(1)
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	steps := []struct {
		name string
		res  mocker.StepResult
		want int
	}{
		{"prefill", mocker.StepResult{Iterations: 1}, 0},
		{"first token", mocker.StepResult{Iterations: 1, FirstTokens: []mocker.FirstToken{{ID: "a", At: at(2)}}}, 1},
		{"decode", mocker.StepResult{Iterations: 1}, 2},
		{"preempted after a decode", mocker.StepResult{Iterations: 1, Preempted: []mocker.Preemption{{ID: "a", At: at(3)}}}, 3},
		{"recompute", mocker.StepResult{Iterations: 2}, 3},
		{"readmitted", mocker.StepResult{Iterations: 1, Admitted: []mocker.Admission{{ID: "a", At: at(6), Readmission: true}}}, 3},
		{"late driver", mocker.StepResult{Iterations: 5}, 4},
		{"finished", mocker.StepResult{Iterations: 1, Finished: []mocker.Completion{{ID: "a", OutputTokens: 5}}}, 5},
	}
	for _, st := range steps {
		r.dispatch(&st.res)
		if got := p.read(); got.tokens != st.want {
			t.Fatalf("%s: %d tokens, want %d", st.name, got.tokens, st.want)
		}
	}
	if pr := p.read(); !pr.finished || pr.err != nil || len(r.reqs) != 0 || r.inflight.Load() != 0 {
		t.Fatalf("not finished cleanly: %+v, %d left", pr, len(r.reqs))
	}
}

func TestEndpointFor(t *testing.T) {
	tests := []struct {
		name string
		addr string
		want string
	}{
		{"loopback", "127.0.0.1:8000", "http://127.0.0.1:8000"},
		{"unspecified v4", "0.0.0.0:8000", "http://127.0.0.1:8000"},
		{"unspecified v6", "[::]:8000", "http://127.0.0.1:8000"},
		{"host", "10.1.2.3:9", "http://10.1.2.3:9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := endpointFor(addr(tc.addr)); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }

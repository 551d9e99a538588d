package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kvrouter/kvrouter/sim"
	"github.com/kvrouter/kvrouter/traces"
)

// Outcome is what the replay client saw of one request.
type Outcome struct {
	TTFT         time.Duration
	Done         time.Duration // from arrival to the last byte
	PromptTokens int
	CachedTokens int
	OutputTokens int
	// Session is the request's session id ("" without sessions) and
	// Worker the engine that served it (X-Kvrouter-Worker).
	Session string
	Worker  string
	// Ingress is the base URL the request was sent to and DC the DC that
	// served it (X-Kvrouter-DC, set by a relay gateway).
	Ingress string
	DC      string
	// Cut marks a stream that broke after its first token: the node
	// serving it died mid-response. Err is set too.
	Cut bool
	Err error
}

// Replayer sends trace requests to an OpenAI-compatible endpoint at their
// (compressed) arrival times, as streaming completions with token-id
// prompts, and records TTFT and the engines' reported cache hits.
type Replayer struct {
	BaseURL string
	// URLs, when set, replaces BaseURL with the live nodes of a cluster:
	// requests go round-robin over them, and a request whose connection
	// is refused or reset before any response moves on to the next node
	// (it reached none, so it cannot have been served twice).
	URLs func() []string
	// Failover sends every request to the first of URLs and moves on to
	// the next only as above: one ingress node, the others standing by.
	Failover bool
	// Target, when set, names the one base URL each request goes to (a
	// DC's gateway); it overrides URLs and BaseURL.
	Target func(i int, req traces.Request) string
	// Sessions sends each request with a session id: its conversation,
	// named by the first block of its prompt.
	Sessions bool
	Model    string
	// Compress divides the trace's inter-arrival times.
	Compress float64
	Client   *http.Client
}

// Run replays reqs and returns one outcome per request, in trace order.
func (r *Replayer) Run(ctx context.Context, reqs []traces.Request) []Outcome {
	out := make([]Outcome, len(reqs))
	start := time.Now()
	var wg sync.WaitGroup
	for i, req := range reqs {
		at := start.Add(time.Duration(float64(req.Arrival) / r.Compress))
		if d := time.Until(at); d > 0 {
			select {
			case <-ctx.Done():
				out[i].Err = ctx.Err()
				continue
			case <-time.After(d):
			}
		}
		wg.Go(func() { out[i] = r.one(ctx, i, req) })
	}
	wg.Wait()
	return out
}

// prompt builds the token ids of a trace record: 512 tokens per hash id, a
// pure function of the id, cut to the input length.
func prompt(req traces.Request) []uint32 {
	toks := make([]uint32, 0, len(req.HashIDs)*traces.MooncakeBlockTokens)
	for _, id := range req.HashIDs {
		toks = sim.TokensOf(id, toks)
	}
	return toks[:min(len(toks), req.InputTokens)]
}

func (r *Replayer) body(req traces.Request) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"model":%q,"stream":true,"stream_options":{"include_usage":true},"max_tokens":%d,"prompt":[`,
		r.Model, max(1, req.OutputTokens))
	for i, t := range prompt(req) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(t), 10))
	}
	b.WriteString("]}")
	return b.Bytes()
}

func (r *Replayer) one(ctx context.Context, i int, req traces.Request) Outcome {
	t0 := time.Now()
	session := ""
	if r.Sessions && len(req.HashIDs) > 0 {
		session = "conv-" + strconv.FormatUint(uint64(req.HashIDs[0]), 10)
	}
	body := r.body(req)
	urls := []string{r.BaseURL}
	switch {
	case r.Target != nil:
		urls = []string{r.Target(i, req)}
	case r.URLs != nil:
		urls = r.URLs()
	}
	var err error
	for try := range max(1, len(urls)) {
		if len(urls) == 0 {
			return Outcome{Session: session, Err: errors.New("no router node is running")}
		}
		base := urls[(i+try)%len(urls)]
		if r.Failover {
			base = urls[try%len(urls)]
		}
		var hr *http.Request
		hr, err = http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
		if err != nil {
			return Outcome{Session: session, Err: err}
		}
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("X-Request-Id", "demo-"+strconv.Itoa(i))
		if session != "" {
			hr.Header.Set("X-Session-ID", session)
		}
		var resp *http.Response
		resp, err = r.Client.Do(hr)
		if err != nil {
			if unreached(err) || broken(err) {
				continue
			}
			return Outcome{Session: session, Err: err}
		}
		o := r.read(resp, t0)
		o.Session, o.Ingress = session, base
		if o.Err != nil && o.TTFT == 0 && broken(o.Err) {
			// The node died before the first token: like a load
			// balancer, try the next one.
			err = o.Err
			continue
		}
		o.Cut = o.Err != nil && broken(o.Err)
		return o
	}
	return Outcome{Session: session, Err: err}
}

// broken reports a connection that ended under the request: the node on
// the other side died.
func broken(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed) ||
		// net/http's unexported error for a pooled connection the server
		// closed before the request was written.
		strings.Contains(err.Error(), "server closed idle connection")
}

// unreached reports whether a request failed before any node could have
// received it.
func unreached(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}

func (r *Replayer) read(resp *http.Response, t0 time.Time) Outcome {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Outcome{Err: fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))}
	}
	o := readStream(resp.Body, t0)
	o.Done = time.Since(t0)
	o.Worker = resp.Header.Get("X-Kvrouter-Worker")
	o.DC = resp.Header.Get("X-Kvrouter-DC")
	return o
}

// chunk is the part of a completions stream chunk the client reads.
type chunk struct {
	Choices []struct {
		Text string `json:"text"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func readStream(body io.Reader, t0 time.Time) Outcome {
	var o Outcome
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			// A stream cut mid-line ends with a partial last line
			// (bufio.Scanner hands it over with the read error); the
			// break, not the partial JSON, is the failure then.
			for sc.Scan() {
			}
			if serr := sc.Err(); serr != nil {
				o.Err = serr
			} else {
				o.Err = fmt.Errorf("bad stream chunk: %w", err)
			}
			return o
		}
		if c.Error != nil {
			o.Err = fmt.Errorf("stream error: %s", c.Error.Message)
			return o
		}
		if len(c.Choices) > 0 && o.TTFT == 0 {
			o.TTFT = time.Since(t0)
		}
		if u := c.Usage; u != nil {
			o.PromptTokens, o.OutputTokens = u.PromptTokens, u.CompletionTokens
			if u.PromptTokensDetails != nil {
				o.CachedTokens = u.PromptTokensDetails.CachedTokens
			}
		}
	}
	if err := sc.Err(); err != nil {
		o.Err = err
	}
	return o
}

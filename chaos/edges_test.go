package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/mocker"
)

// edgeCase is one request of the malformed corpus.
type edgeCase struct {
	name, path, ctype string
	body              []byte
}

// malformedCorpus is the S18 corpus replayed against a live node: invalid
// UTF-8, wrong types, deep nesting, negative and absurd numbers, unknown
// fields, truncated and empty bodies, on every OpenAI route. The fuzz
// targets of the parsers behind it (internal/oaiedge FuzzParse*) explore
// further; this checks the whole process.
func malformedCorpus() []edgeCase {
	deep := strings.Repeat("[", 1000) + strings.Repeat("]", 1000)
	bodies := map[string]string{
		"empty":               "",
		"not json":            "hello",
		"truncated":           `{"model":"` + mocker.DefaultModel + `","prompt":[1,2,`,
		"invalid utf-8":       "{\"model\":\"\xff\xfe\",\"prompt\":\"\xc3\x28\"}",
		"prompt wrong type":   `{"model":"` + mocker.DefaultModel + `","prompt":{"a":1}}`,
		"messages wrong type": `{"model":"` + mocker.DefaultModel + `","messages":"hi"}`,
		"deep nesting":        `{"model":"` + mocker.DefaultModel + `","prompt":` + deep + `}`,
		"deep messages":       `{"model":"` + mocker.DefaultModel + `","messages":` + deep + `}`,
		"negative max_tokens": `{"model":"` + mocker.DefaultModel + `","prompt":[1,2,3],"max_tokens":-5}`,
		"huge max_tokens":     `{"model":"` + mocker.DefaultModel + `","prompt":[1,2,3],"max_tokens":1e400}`,
		"token out of range":  `{"model":"` + mocker.DefaultModel + `","prompt":[-1,99999999999999999999]}`,
		"unknown fields":      `{"model":"` + mocker.DefaultModel + `","prompt":[1],"zzz":{"y":[null]},"stream":"yes"}`,
		"unknown model":       `{"model":"nope","prompt":[1,2,3]}`,
		"null everything":     `{"model":null,"prompt":null,"messages":null,"input":null}`,
		"array top level":     `[1,2,3]`,
		"duplicate keys":      `{"model":"a","model":"` + mocker.DefaultModel + `","prompt":[1],"prompt":"x"}`,
		"nul bytes":           "{\"model\":\"" + mocker.DefaultModel + "\",\"prompt\":\"a\x00b\"}",
	}
	var out []edgeCase
	for _, path := range []string{"/v1/completions", "/v1/chat/completions", "/v1/embeddings", "/v1/responses"} {
		for name, b := range bodies {
			out = append(out, edgeCase{name: name, path: path, ctype: "application/json", body: []byte(b)})
		}
		out = append(out, edgeCase{name: "wrong content type", path: path, ctype: "text/plain", body: []byte("x")})
	}
	slices.SortFunc(out, func(a, b edgeCase) int { return strings.Compare(a.path+a.name, b.path+b.name) })
	return out
}

// TestS18MalformedRequests replays the malformed corpus against a live
// node process: no answer is a 5xx or a dropped connection (all but the
// valid-after-all duplicate-keys case are 4xx), and the node stays ready and serves a valid request after.
// Runs in make test (one node, about two seconds).
func TestS18MalformedRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("node process; run without -short")
	}
	d := startNamedDC(t, "dc1", 1, 1)
	m := d.members[0]
	rep := newReport(t, "S18 MalformedRequests", "1 node, 1 engine")
	rep.watchDC(d)
	rss0, _ := procStat(m.pid())
	c := &http.Client{Timeout: 10 * time.Second}
	hist := map[int]int{}
	for _, ec := range malformedCorpus() {
		resp, err := c.Post("http://"+m.http+ec.path, ec.ctype, bytes.NewReader(ec.body))
		if err != nil {
			t.Errorf("%s %s: %v", ec.path, ec.name, err)
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		hist[resp.StatusCode]++
		// A few cases are valid after all (duplicate keys: the last one
		// wins); what must never happen is a 5xx or a dropped connection.
		if resp.StatusCode >= 500 {
			t.Errorf("%s %s: status %d", ec.path, ec.name, resp.StatusCode)
		}
	}
	for code, n := range hist {
		rep.Ops[fmt.Sprint(code)] = n
	}
	d.waitReady(m, 5*time.Second)
	h := newHistory()
	if newClient(0, h).route(m, "s-1", 1) == "" {
		t.Fatal("a valid request failed after the corpus")
	}
	rss1, _ := procStat(m.pid())
	rep.figure("rss_drift_mib", fmt.Sprintf("%.1f", rss1-rss0))
	rep.verdict("no_5xx", "ok")
	if t.Failed() {
		rep.verdict("no_5xx", "FAILED")
	}
}

// completionBody is a valid completion of n prompt tokens.
func completionBody(n int) []byte {
	toks := make([]int, n)
	for i := range toks {
		toks[i] = i % 30000
	}
	b, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": toks, "max_tokens": 1})
	return b
}

// normalTraffic sends valid requests with a session through m until stop
// and returns their latencies and failures.
type normalTraffic struct {
	mu     sync.Mutex
	lat    []time.Duration
	failed int
	stop   chan struct{}
	wg     sync.WaitGroup
}

func startNormal(m *member, clients int) *normalTraffic {
	n := &normalTraffic{stop: make(chan struct{})}
	for ci := range clients {
		n.wg.Go(func() {
			h := newHistory()
			c := newClient(ci, h)
			for i := 0; ; i++ {
				select {
				case <-n.stop:
					return
				default:
				}
				start := time.Now()
				ok := c.route(m, fmt.Sprintf("s-%d", ci*1000+i%50), i) != ""
				n.mu.Lock()
				if ok {
					n.lat = append(n.lat, time.Since(start))
				} else {
					n.failed++
				}
				n.mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	return n
}

// end stops the traffic and returns the p99 latency and failure count.
func (n *normalTraffic) end() (time.Duration, int) {
	close(n.stop)
	n.wg.Wait()
	if len(n.lat) == 0 {
		return 0, n.failed
	}
	slices.Sort(n.lat)
	return n.lat[len(n.lat)*99/100], n.failed
}

// countingReader yields size bytes of a JSON-ish body and counts what was
// read from it.
type countingReader struct {
	size, read int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	if r.read >= r.size {
		return 0, io.EOF
	}
	n := int64(len(p))
	if r.read == 0 {
		copy(p, `{"prompt":"`)
	}
	n = min(n, r.size-r.read)
	for i := range p[:n] {
		if r.read == 0 && i < 11 {
			continue
		}
		p[i] = 'a'
	}
	atomic.AddInt64(&r.read, n)
	return int(n), nil
}

// s19BodyBudget is S19's --max-buffered-body-bytes: four times the
// per-request limit (32 MiB), so that the 20 concurrent 40 MB uploads ask
// for five times what the node may hold.
const s19BodyBudget = 128 << 20

// TestS19HugeRequests: a 100 MB body, a prompt over the node's token
// limit, a chat of 10k messages, and 20 concurrent 40 MB uploads, while
// normal clients keep routing. Every abusive request is refused with a
// 4xx (413 for the bodies over the limit, which are cut before they are
// read in full) or, for the concurrent uploads that find the node's body
// budget full, 503 before their body is read; normal traffic keeps being
// served; and the node's peak resident memory stays within a bound
// derived from the budget (the bodies it may hold, the buffers the
// collector has yet to reclaim, and the node's own baseline).
func TestS19HugeRequests(t *testing.T) {
	chaosOnly(t)
	d := startDCWith(t, "dc1", 1, func(d *dc, ctx context.Context, wg *sync.WaitGroup) {
		startEngine(t, ctx, wg, d.nats, "dc1", 1)
	}, "--max-prompt-tokens", "4096", "--max-buffered-body-bytes", strconv.Itoa(s19BodyBudget))
	m := d.members[0]
	rep := newReport(t, "S19 HugeRequests", "1 node, 1 engine, --max-prompt-tokens 4096, --max-buffered-body-bytes 128 MiB")
	rep.watchDC(d)
	rss0, _ := procStat(m.pid())
	normal := startNormal(m, 4)
	c := &http.Client{Timeout: 60 * time.Second}
	post := func(what string, body io.Reader, want func(int) bool) int {
		start := time.Now()
		resp, err := c.Post("http://"+m.http+"/v1/completions", "application/json", body)
		if err != nil {
			// The node may close the connection after its 413 while the
			// client is still writing; the refusal is what counts.
			t.Logf("%s: %v after %v", what, err, time.Since(start))
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if !want(resp.StatusCode) {
			t.Errorf("%s: status %d", what, resp.StatusCode)
		}
		rep.figure("reject_ms_"+strings.ReplaceAll(what, " ", "_"), time.Since(start).Milliseconds())
		return resp.StatusCode
	}
	is4xx := func(c int) bool { return c >= 400 && c < 500 }
	big := &countingReader{size: 100 << 20}
	if code := post("100MB body", big, func(c int) bool { return c == 413 }); code != 0 {
		rep.Ops[fmt.Sprint(code)]++
	}
	rep.figure("100MB_bytes_read_before_reject_MiB", atomic.LoadInt64(&big.read)>>20)
	rep.Ops[fmt.Sprint(post("prompt over limit", bytes.NewReader(completionBody(5000)), is4xx))]++
	msgs := make([]map[string]string, 10000)
	for i := range msgs {
		msgs[i] = map[string]string{"role": "user", "content": "hello there"}
	}
	chat, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "messages": msgs, "max_tokens": 1})
	resp, err := c.Post("http://"+m.http+"/v1/chat/completions", "application/json", bytes.NewReader(chat))
	if err != nil {
		t.Errorf("10k messages: %v", err)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		rep.Ops[fmt.Sprint(resp.StatusCode)]++
		if resp.StatusCode >= 500 {
			t.Errorf("10k messages: status %d", resp.StatusCode)
		}
	}
	var wg sync.WaitGroup
	var codes sync.Map
	for range 20 {
		wg.Go(func() {
			resp, err := c.Post("http://"+m.http+"/v1/completions", "application/json", &countingReader{size: 40 << 20})
			code := 0
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				code = resp.StatusCode
			}
			v, _ := codes.LoadOrStore(code, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
		})
	}
	wg.Wait()
	codes.Range(func(k, v any) bool {
		rep.Ops[fmt.Sprint(k)] += int(v.(*atomic.Int64).Load())
		if code := k.(int); code != 413 && code != 503 && code != 0 {
			t.Errorf("a 40 MB upload got %d, want 413 or 503 (body budget)", code)
		}
		return true
	})
	p99, failed := normal.end()
	rep.figure("normal_p99_ms", p99.Milliseconds())
	rep.figure("normal_failed", failed)
	rss1 := rep.peakRSS(m.id)
	rep.figure("peak_rss_delta_mib", fmt.Sprintf("%.0f", rss1-rss0))
	rep.figure("body_budget_refusals", int(metricSum(t, m, "kvrouter_edge_body_budget_refusals_total")))
	// The bodies held are at most the budget; a body of unknown length
	// also has its previous, half-size buffer alive while it grows, and
	// the collector lets the heap reach about twice what is live before
	// it runs (GOGC=100). 64 MiB covers the rest of the node's work.
	bound := 3*float64(s19BodyBudget>>20) + 64
	rep.figure("peak_rss_delta_bound_mib", bound)
	if rss1-rss0 > bound {
		t.Errorf("peak RSS grew by %.0f MiB, over the bound of %.0f MiB derived from the body budget", rss1-rss0, bound)
	}
	if held := metricSum(t, m, "kvrouter_edge_buffered_body_bytes"); held > 1<<20 {
		t.Errorf("%.0f body bytes still held after the uploads", held)
	}
	if failed > 0 {
		t.Errorf("%d normal requests failed during the abuse", failed)
	}
	d.waitReady(m, 5*time.Second)
}

// peakRSS is the peak resident set sampled for a process so far (MiB).
func (r *report) peakRSS(name string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.Procs[name]; p != nil {
		return p.RSSMiB
	}
	return 0
}

// TestS20Slowloris: attackers hold connections to a node: some trickle
// request headers one byte at a time, some send headers and then trickle
// the body, while normal clients keep routing and one legitimate
// streaming request reads its stream slowly but steadily. The header
// tricklers must be cut by the header timeout (10 s) and the body
// tricklers by the body timeout (30 s); normal traffic is served
// throughout and the legitimate stream completes. The time each kind
// took to be closed and the connections held are figures.
func TestS20Slowloris(t *testing.T) {
	chaosOnly(t)
	d := startNamedDC(t, "dc1", 1, 1)
	m := d.members[0]
	rep := newReport(t, "S20 Slowloris", "1 node, 1 engine")
	rep.watchDC(d)
	normal := startNormal(m, 4)
	const headerConns, bodyConns = 400, 100
	type closed struct {
		kind string
		took time.Duration
	}
	results := make(chan closed, headerConns+bodyConns)
	attack := func(kind string, prefix string, trickle string) {
		conn, err := net.DialTimeout("tcp", m.http, 5*time.Second)
		if err != nil {
			results <- closed{kind: kind + "_refused"}
			return
		}
		defer conn.Close()
		start := time.Now()
		if prefix != "" {
			_, _ = conn.Write([]byte(prefix))
		}
		for i := 0; time.Since(start) < 90*time.Second; i++ {
			if _, err := conn.Write([]byte{trickle[i%len(trickle)]}); err != nil {
				break
			}
			_ = conn.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := conn.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
				break // the server closed it (or answered and closed)
			}
		}
		results <- closed{kind: kind, took: time.Since(start)}
	}
	var wg sync.WaitGroup
	for range headerConns {
		wg.Go(func() { attack("header", "", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-A: ") })
	}
	body := fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", 1<<20)
	for range bodyConns {
		wg.Go(func() { attack("body", body, `{"prompt":"aaaaaaaa`) })
	}
	// A legitimate stream read slowly: it must complete.
	legit := make(chan error, 1)
	go func() { legit <- slowStream(m, 64) }()
	wg.Wait()
	close(results)
	worst := map[string]time.Duration{}
	for r := range results {
		rep.Ops["closed_"+r.kind]++
		worst[r.kind] = max(worst[r.kind], r.took)
	}
	for kind, w := range worst {
		rep.figure("time_to_close_max_s_"+kind, int(w.Seconds()))
	}
	if w := worst["header"]; w > 20*time.Second {
		t.Errorf("a header trickler held its connection for %v", w)
	}
	if w := worst["body"]; w > 45*time.Second {
		t.Errorf("a body trickler held its connection for %v", w)
	}
	if err := <-legit; err != nil {
		rep.verdict("legit_stream", err.Error())
		t.Errorf("the legitimate slow stream: %v", err)
	} else {
		rep.verdict("legit_stream", "completed")
	}
	p99, failed := normal.end()
	rep.figure("normal_p99_ms", p99.Milliseconds())
	rep.figure("normal_failed", failed)
	if failed > 0 {
		t.Errorf("%d normal requests failed during the attack", failed)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// slowStream reads a streamed completion of n tokens a line every 50 ms.
func slowStream(m *member, n int) error {
	b, _ := json.Marshal(map[string]any{"model": mocker.DefaultModel, "prompt": []int{1, 2, 3, 4}, "max_tokens": n, "stream": true})
	resp, err := http.Post("http://"+m.http+"/v1/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "data: [DONE]" {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	if sc.Err() != nil {
		return sc.Err()
	}
	return fmt.Errorf("stream ended without [DONE]")
}

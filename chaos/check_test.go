package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// sessionModel is a session in hard affinity mode while its engines live:
// a write-once register. A served request either binds the free session to
// its engine or was served by the bound one; an indeterminate request may
// have bound the free session to any engine, or done nothing.
func sessionModel(engines []string) porcupine.Model {
	nm := &porcupine.NondeterministicModel{
		Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var keys []string
			for _, o := range ops {
				s := o.Input.(string)
				if _, ok := by[s]; !ok {
					keys = append(keys, s)
				}
				by[s] = append(by[s], o)
			}
			sort.Strings(keys)
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, by[k])
			}
			return out
		},
		Init: func() []any { return []any{""} },
		Step: func(state, _, output any) []any {
			bound, out := state.(string), output.(result)
			switch {
			case out.unknown && bound == "":
				next := []any{""}
				for _, e := range engines {
					next = append(next, e)
				}
				return next
			case out.unknown:
				return []any{bound}
			case bound == "" || bound == out.engine:
				return []any{out.engine}
			}
			return nil
		},
		DescribeOperation: func(input, output any) string {
			return fmt.Sprintf("route(%s) -> %s", input, output.(result))
		},
		DescribeState: func(state any) string {
			if state.(string) == "" {
				return "unbound"
			}
			return state.(string)
		},
	}
	return nm.ToModel()
}

// result is an operation's output in the model.
type result struct {
	engine  string
	unknown bool
}

func (r result) String() string {
	if r.unknown {
		return "?"
	}
	return r.engine
}

// checkLinearizable runs porcupine over the history. An indeterminate
// operation's return is the end of the history: its effect may land at
// any time after its call. On failure the visualisation is written to dir.
func checkLinearizable(t *testing.T, h *history, dir string) {
	t.Helper()
	engineSet := map[string]bool{}
	var end int64
	for _, o := range h.ops {
		if !o.unknown {
			engineSet[o.engine] = true
		}
		end = max(end, o.ret)
	}
	var engines []string
	for e := range engineSet {
		engines = append(engines, e)
	}
	sort.Strings(engines)
	ops := make([]porcupine.Operation, 0, len(h.ops))
	for _, o := range h.ops {
		ret := o.ret
		if o.unknown {
			ret = end + 1
		}
		ops = append(ops, porcupine.Operation{ClientId: o.client, Input: o.session, Call: o.call,
			Output: result{engine: o.engine, unknown: o.unknown}, Return: ret})
	}
	model := sessionModel(engines)
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, ops, 2*time.Minute)
	t.Logf("porcupine: %v over %d operations in %v", res, len(ops), time.Since(start).Round(time.Millisecond))
	if res != porcupine.Ok {
		path := filepath.Join(dir, "history.html")
		if f, err := os.Create(path); err == nil {
			_ = porcupine.Visualize(model, info, f)
			_ = f.Close()
			keep := filepath.Join(os.TempDir(), fmt.Sprintf("kvrouter-chaos-%s-history.html", t.Name()))
			if b, err := os.ReadFile(path); err == nil {
				_ = os.WriteFile(keep, b, 0o644)
				path = keep
			}
		}
		t.Fatalf("history is not linearizable (%v); visualisation: %s", res, path)
	}
}

// doubleServed returns the sessions served by more than one engine.
func doubleServed(h *history) []string {
	by := map[string]map[string]bool{}
	for _, o := range h.ops {
		if o.unknown {
			continue
		}
		if by[o.session] == nil {
			by[o.session] = map[string]bool{}
		}
		by[o.session][o.engine] = true
	}
	var out []string
	for s, es := range by {
		if len(es) > 1 {
			out = append(out, fmt.Sprintf("%s: %v", s, es))
		}
	}
	sort.Strings(out)
	return out
}

// summary counts a history's outcomes.
func summary(h *history) (ok, unknown int, sessions int) {
	seen := map[string]bool{}
	for _, o := range h.ops {
		if o.unknown {
			unknown++
		} else {
			ok++
			seen[o.session] = true
		}
	}
	return ok, unknown, len(seen)
}

// TestSessionModelRejectsASecondEngine checks the checker: a history in
// which one session is served by two engines one after the other is not
// linearizable, while one with an indeterminate request in between still
// is when the engines agree.
func TestSessionModelRejectsASecondEngine(t *testing.T) {
	m := sessionModel([]string{"1/0", "2/0"})
	bad := []porcupine.Operation{
		{ClientId: 0, Input: "s", Call: 0, Output: result{engine: "1/0"}, Return: 10},
		{ClientId: 1, Input: "s", Call: 20, Output: result{engine: "2/0"}, Return: 30},
	}
	if porcupine.CheckOperations(m, bad) {
		t.Fatal("two engines for one session passed")
	}
	good := []porcupine.Operation{
		{ClientId: 0, Input: "s", Call: 0, Output: result{unknown: true}, Return: 100},
		{ClientId: 1, Input: "s", Call: 20, Output: result{engine: "2/0"}, Return: 30},
		{ClientId: 2, Input: "s", Call: 40, Output: result{engine: "2/0"}, Return: 50},
	}
	if !porcupine.CheckOperations(m, good) {
		t.Fatal("a consistent history failed")
	}
	concurrent := []porcupine.Operation{
		{ClientId: 0, Input: "s", Call: 0, Output: result{engine: "1/0"}, Return: 30},
		{ClientId: 1, Input: "s", Call: 10, Output: result{engine: "2/0"}, Return: 20},
	}
	if porcupine.CheckOperations(m, concurrent) {
		t.Fatal("concurrent first requests served by two engines passed")
	}
}

package chaos

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
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

// linearizableIn checks h with porcupine; on failure it writes the
// visualisation into dir and returns its path.
func linearizableIn(t *testing.T, h *history, dir string) (porcupine.CheckResult, string) {
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
		return res, path
	}
	return res, ""
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

// checkAll is the one checker of a bind scenario (reliability plan P1–P4):
// a substantial workload; no session served by two engines; equal FSM
// state hashes on every live member once the load stopped (time recorded
// as the final convergence); no acknowledged binding lost; a linearizable
// history. Every verdict goes into the report; the test fails at the end
// if any check failed.
func checkAll(t *testing.T, d *dc, h *history, rep *report) {
	t.Helper()
	rep.outcomes(h)
	ok, unknown, sessions := summary(h)
	t.Logf("operations: %d served, %d indeterminate, %d refused; %d sessions served", ok, unknown, h.refused.Load(), sessions)
	var failed []string
	fail := func(name, msg string) {
		rep.verdict(name, msg)
		failed = append(failed, name+": "+msg)
	}
	if ok == 0 || sessions < 50 {
		fail("workload", fmt.Sprintf("too thin: %d served over %d sessions", ok, sessions))
	}
	if dbl := doubleServed(h); len(dbl) > 0 {
		fail("double_served", fmt.Sprintf("%d sessions served by two engines: %s", len(dbl), strings.Join(dbl[:min(5, len(dbl))], "; ")))
	} else {
		rep.verdict("double_served", "0")
	}
	if took, err := equalStateHashes(d, 20*time.Second); err != nil {
		fail("state_hash", err.Error())
	} else {
		rep.verdict("state_hash", "equal")
		rep.figure("hash_equal_after_ms", took.Milliseconds())
	}
	if lost := verifyAll(t, d, h); len(lost) > 0 {
		fail("lost_acked", fmt.Sprintf("%d: %s", len(lost), strings.Join(lost[:min(5, len(lost))], "; ")))
	} else {
		rep.verdict("lost_acked", "0")
	}
	if res, took := linearizable(t, h); res != porcupine.Ok {
		fail("linearizable", fmt.Sprint(res))
	} else {
		rep.verdict("linearizable", fmt.Sprintf("ok %dms", took.Milliseconds()))
	}
	if len(failed) > 0 {
		t.Fatalf("checks failed: %s", strings.Join(failed, " | "))
	}
}

// linearizable runs porcupine and writes the visualisation on failure.
func linearizable(t *testing.T, h *history) (porcupine.CheckResult, time.Duration) {
	t.Helper()
	start := time.Now()
	res, _ := linearizableIn(t, h, t.ArtifactDir())
	return res, time.Since(start)
}

// equalStateHashes waits until every live member reports the same applied
// index and FSM state hash, and returns how long that took.
func equalStateHashes(d *dc, within time.Duration) (time.Duration, error) {
	start := time.Now()
	var last string
	for time.Since(start) < within {
		idx, hashes := map[uint64]bool{}, map[uint64]bool{}
		var parts []string
		okAll := true
		for _, m := range d.live() {
			st, err := adminStatus(m.api)
			if err != nil {
				okAll = false
				parts = append(parts, m.id+": "+err.Error())
				continue
			}
			idx[st.GetAppliedIndex()], hashes[st.GetStateHash()] = true, true
			parts = append(parts, fmt.Sprintf("%s@%d=%x", m.id, st.GetAppliedIndex(), st.GetStateHash()))
		}
		last = strings.Join(parts, " ")
		if okAll && len(idx) == 1 && len(hashes) == 1 {
			return time.Since(start), nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, fmt.Errorf("members did not converge within %v: %s", within, last)
}

// caughtUp waits until every live member applied the leader's commit
// index of the moment it is called, and returns how long that took: the
// time to converge after a heal.
func caughtUp(d *dc, within time.Duration) (time.Duration, error) {
	start := time.Now()
	var target uint64
	for target == 0 && time.Since(start) < within {
		for _, m := range d.live() {
			if st, err := adminStatus(m.api); err == nil && st.GetState() == "Leader" {
				target = st.GetCommitIndex()
			}
		}
		if target == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	for time.Since(start) < within {
		behind := 0
		for _, m := range d.live() {
			if st, err := adminStatus(m.api); err != nil || st.GetAppliedIndex() < target {
				behind++
			}
		}
		if behind == 0 && target > 0 {
			return time.Since(start), nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, fmt.Errorf("members did not reach the leader's commit index %d within %v", target, within)
}

// firstBindAfter is the unavailability window of a fault at since: from
// it to the return of the first new binding (the first acknowledged
// operation of its session) sent after it; ok is false when none was.
func firstBindAfter(h *history, since int64) (time.Duration, bool) {
	seen := map[string]bool{}
	best := int64(-1)
	for _, o := range sortedByReturn(h) {
		if o.unknown {
			continue
		}
		if !seen[o.session] && o.call >= since && (best < 0 || o.ret < best) {
			best = o.ret
		}
		seen[o.session] = true
	}
	if best < 0 {
		return 0, false
	}
	return time.Duration(best - since), true
}

// sortedByReturn is a copy of h's operations in the order they returned.
func sortedByReturn(h *history) []op {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	h.mu.Unlock()
	slices.SortFunc(ops, func(a, b op) int { return cmp.Compare(a.ret, b.ret) })
	return ops
}

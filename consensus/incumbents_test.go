package consensus

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

func setIncumbentCmd(model, checksum, id string) *kvrpb.RaftSetIncumbent {
	return &kvrpb.RaftSetIncumbent{RequestId: id, Incumbent: &kvrpb.RaftIncumbent{
		Namespace: "ns", Component: "backend", Endpoint: "generate", Model: model, WorkerType: "aggregated", Checksum: checksum}}
}

func incumbentOf(f *FSM, model string) string {
	return f.WorkerSetIncumbents().BySet[IncumbentKey("ns", "backend", "generate", model, "aggregated")]
}

func TestIncumbentsApplySnapshotAndUnset(t *testing.T) {
	f := NewFSM(nil, nil, nil)
	gen := f.WorkerSetIncumbents().Generation
	applyAt(t, f, 1, setIncumbentCmd("m", "A", "r1"))
	applyAt(t, f, 2, setIncumbentCmd("other", "B", ""))
	applyAt(t, f, 3, setIncumbentCmd("m", "C", "")) // a succession
	if got := incumbentOf(f, "m"); got != "C" {
		t.Fatalf("incumbent %q, want C", got)
	}
	if f.WorkerSetIncumbents().Generation == gen {
		t.Fatal("generation did not change")
	}
	g := snapshotRoundTrip(t, f)
	if got := incumbentOf(g, "m"); got != "C" {
		t.Fatalf("restored incumbent %q", got)
	}
	_, ah := f.StateHash()
	_, bh := g.StateHash()
	if ah != bh {
		t.Fatal("state hashes differ after a snapshot round trip")
	}
	un := setIncumbentCmd("m", "", "")
	un.Unset = true
	applyAt(t, g, 4, un)
	if got := incumbentOf(g, "m"); got != "" {
		t.Fatalf("unset left %q", got)
	}
}

func TestIncumbentsSurviveRestart(t *testing.T) {
	fs := vfs.NewMem()
	f, _, done := openStoreFSM(t, fs, "fsm")
	applyAt(t, f, 1, setIncumbentCmd("m", "A", "r1"))
	done()
	g, _, _ := openStoreFSM(t, fs, "fsm")
	if got := incumbentOf(g, "m"); got != "A" {
		t.Fatalf("incumbent after reopening: %q", got)
	}
}

func TestIncumbentEntryIsIgnorable(t *testing.T) {
	data, err := Encode(setIncumbentCmd("m", "A", ""))
	if err != nil {
		t.Fatal(err)
	}
	if !Type(data[0]).Ignorable() || Type(data[0]).Number() != uint8(TypeSetIncumbent) {
		t.Fatalf("type byte %#x lacks the ignore bit", data[0])
	}
	// A node that does not know the command skips it instead of halting.
	delete(commands, TypeSetIncumbent)
	defer func() { commands[TypeSetIncumbent] = setIncumbentSpec }()
	f := NewFSM(nil, nil, nil)
	r, err := unwrapResponse(f.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: data}))
	if err != nil || Code(r.Code) != CodeIgnored || f.Halted() != nil {
		t.Fatalf("old node: result %v err %v halted %v", r, err, f.Halted())
	}
}

func TestIncumbentValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *kvrpb.RaftSetIncumbent
	}{
		{name: "no record", m: &kvrpb.RaftSetIncumbent{}},
		{name: "no model", m: setIncumbentCmd("", "A", "")},
		{name: "no checksum", m: setIncumbentCmd("m", "", "")},
		{name: "NUL in a name", m: setIncumbentCmd("m\x00x", "A", "")},
	} {
		if _, err := Encode(tc.m); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

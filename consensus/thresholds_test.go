package consensus

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

func setThresholdsCmd(model string, frac float64, id string) *kvrpb.RaftSetThresholds {
	return &kvrpb.RaftSetThresholds{RequestId: id, Thresholds: &kvrpb.RaftThresholds{Model: model, ActivePrefillTokensFrac: &frac}}
}

func TestThresholdsApplySnapshotAndReset(t *testing.T) {
	f := NewFSM(nil, nil, nil)
	applyAt(t, f, 1, setThresholdsCmd("m", 1.5, "r1"))
	applyAt(t, f, 2, setThresholdsCmd("other", 0.5, ""))
	if th, ok := f.RuntimeThresholds("m"); !ok || th.GetActivePrefillTokensFrac() != 1.5 {
		t.Fatalf("thresholds %v", th)
	}
	g := snapshotRoundTrip(t, f)
	if th, ok := g.RuntimeThresholds("m"); !ok || th.GetActivePrefillTokensFrac() != 1.5 {
		t.Fatalf("restored thresholds %v", th)
	}
	_, ah := f.StateHash()
	_, bh := g.StateHash()
	if ah != bh {
		t.Fatal("state hashes differ after a snapshot round trip")
	}
	applyAt(t, g, 3, &kvrpb.RaftSetThresholds{Thresholds: &kvrpb.RaftThresholds{Model: "m"}, Unset: true})
	if _, ok := g.RuntimeThresholds("m"); ok {
		t.Fatal("unset left the thresholds")
	}
}

func TestThresholdsSurviveRestart(t *testing.T) {
	fs := vfs.NewMem()
	f, _, done := openStoreFSM(t, fs, "fsm")
	applyAt(t, f, 1, setThresholdsCmd("m", 2, "r1"))
	done()
	g, _, _ := openStoreFSM(t, fs, "fsm")
	if th, ok := g.RuntimeThresholds("m"); !ok || th.GetActivePrefillTokensFrac() != 2 {
		t.Fatalf("thresholds after reopening: %v", th)
	}
}

func TestThresholdsEntryIsIgnorable(t *testing.T) {
	data, err := Encode(setThresholdsCmd("m", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	if !Type(data[0]).Ignorable() || Type(data[0]).Number() != uint8(TypeSetThresholds) {
		t.Fatalf("type byte %#x lacks the ignore bit", data[0])
	}
	// A node that does not know the command skips it instead of halting.
	delete(commands, TypeSetThresholds)
	defer func() { commands[TypeSetThresholds] = setThresholdsSpec }()
	f := NewFSM(nil, nil, nil)
	r, err := unwrapResponse(f.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: data}))
	if err != nil || Code(r.Code) != CodeIgnored || f.Halted() != nil {
		t.Fatalf("old node: result %v err %v halted %v", r, err, f.Halted())
	}
}

func TestThresholdsValidation(t *testing.T) {
	neg := int64(-1)
	for name, m := range map[string]*kvrpb.RaftSetThresholds{
		"no model":      {Thresholds: &kvrpb.RaftThresholds{}},
		"negative":      {Thresholds: &kvrpb.RaftThresholds{Model: "m", ActivePrefillTokens: &neg}},
		"decode over 1": setThresholdsCmd("m", 1, ""),
		"no thresholds": {},
	} {
		if name == "decode over 1" {
			v := 2.0
			m.Thresholds.ActiveDecodeBlocks = &v
		}
		if _, err := Encode(m); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

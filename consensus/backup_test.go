package consensus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// TestBackupRestoreIntoFreshCluster backs up a follower of one cluster
// through the backup file format and restores it into another cluster
// that has state of its own: every node of the second cluster must end
// with exactly the first one's bindings, and keep accepting binds.
func TestBackupRestoreIntoFreshCluster(t *testing.T) {
	src := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := newSessions(t, src.nodes[src.leader()])
	want := map[string]uint64{}
	for i := range 50 {
		key := fmt.Sprintf("s%d", i)
		if _, won, err := s.Bind(ctx, key, routing.Worker{ID: routing.WorkerID(1 + i%3)}, 0, src.clock.Now()); err != nil || !won {
			t.Fatalf("bind %s: won %v err %v", key, won, err)
		}
		want[key] = uint64(1 + i%3)
	}
	src.converge()
	var snap, file bytes.Buffer
	info, err := src.nodes[src.follower(src.leader())].WriteBackup(&snap)
	if err != nil {
		t.Fatal(err)
	}
	if info.GetBindings() != 50 || info.GetAppliedIndex() == 0 {
		t.Fatalf("backup info %v, want 50 bindings at a non-zero index", info)
	}
	if err := WriteBackupFile(&file, info, &snap); err != nil {
		t.Fatal(err)
	}

	dst := newCluster(t, 3)
	ds := newSessions(t, dst.nodes[dst.leader()])
	if _, _, err := ds.Bind(ctx, "only-in-dst", routing.Worker{ID: 9}, 0, dst.clock.Now()); err != nil {
		t.Fatal(err)
	}
	got, stream, err := ReadBackupFile(bytes.NewReader(file.Bytes()))
	if err != nil || got.GetBindings() != 50 {
		t.Fatalf("reading the file: info %v err %v", got, err)
	}
	if _, err := dst.nodes[dst.follower(dst.leader())].RestoreBackup(stream); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("restore on a follower: %v, want ErrNotLeader", err)
	}
	_, stream, _ = ReadBackupFile(bytes.NewReader(file.Bytes()))
	res, err := dst.nodes[dst.leader()].RestoreBackup(stream)
	if err != nil {
		t.Fatal(err)
	}
	if res.GetBindings() != 50 {
		t.Fatalf("restored %d bindings, want 50", res.GetBindings())
	}
	// A bind after the restore also moves the applied index past raft's
	// no-op that ends the restore, which converge waits for.
	if _, won, err := ds.Bind(ctx, "after-restore", routing.Worker{ID: 2}, 0, dst.clock.Now()); err != nil || !won {
		t.Fatalf("bind after the restore: won %v err %v", won, err)
	}
	want["after-restore"] = 2
	dst.converge()
	for _, n := range dst.nodes {
		if n.FSM().NumSessions() != len(want) {
			t.Errorf("%s holds %d sessions, want %d", n.ID(), n.FSM().NumSessions(), len(want))
		}
		for k, w := range want {
			if b, ok := n.FSM().Session(k); !ok || b.WorkerId != w {
				t.Errorf("%s: session %s = %v, want worker %d", n.ID(), k, b, w)
			}
		}
		if _, ok := n.FSM().Session("only-in-dst"); ok {
			t.Errorf("%s kept a binding the backup does not hold", n.ID())
		}
	}
}

// TestRestoreRefusesDamagedBackup flips bytes in a backup: the restore
// must fail with ErrBadSnapshot and change nothing.
func TestRestoreRefusesDamagedBackup(t *testing.T) {
	src := newCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s := newSessions(t, src.nodes[src.leader()])
	for i := range 5 {
		if _, _, err := s.Bind(ctx, fmt.Sprintf("k%d", i), routing.Worker{ID: 1}, 0, src.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	var snap bytes.Buffer
	if _, err := src.nodes[0].WriteBackup(&snap); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		damage func([]byte) []byte
	}{
		{name: "flipped byte", damage: func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }},
		{name: "truncated", damage: func(b []byte) []byte { return b[:len(b)-3] }},
		{name: "empty", damage: func([]byte) []byte { return nil }},
	}
	dst := newCluster(t, 1)
	l := dst.nodes[dst.leader()]
	ds := newSessions(t, l)
	if _, _, err := ds.Bind(ctx, "keep", routing.Worker{ID: 4}, 0, dst.clock.Now()); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.damage(bytes.Clone(snap.Bytes()))
			if _, err := l.RestoreBackup(bytes.NewReader(b)); !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("err %v, want ErrBadSnapshot", err)
			}
			if _, ok := l.FSM().Session("keep"); !ok || l.FSM().NumSessions() != 1 {
				t.Fatal("a refused restore changed the state")
			}
		})
	}
}

func TestReadBackupFile(t *testing.T) {
	tests := []struct {
		name, in string
		wantErr  bool
	}{
		{name: "good", in: backupMagic + "\n{\"dc\":\"dc1\",\"bindings\":\"3\"}\nDATA"},
		{name: "other magic", in: "kvrouter-backup 2\n{}\n", wantErr: true},
		{name: "not a backup", in: "PK\x03\x04 a zip", wantErr: true},
		{name: "bad info", in: backupMagic + "\n{not json}\n", wantErr: true},
		{name: "no info line end", in: backupMagic + "\n{}", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ReadBackupFile(bytes.NewReader([]byte(tt.in)))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrBadBackupFile) {
				t.Fatalf("err %v does not wrap ErrBadBackupFile", err)
			}
		})
	}
}

func FuzzReadBackupFile(f *testing.F) {
	f.Add([]byte(backupMagic + "\n{\"dc\":\"dc1\"}\nDATA"))
	f.Add([]byte(backupMagic + "\n\n"))
	f.Add([]byte("kvrouter-backup 1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, rest, err := ReadBackupFile(bytes.NewReader(b))
		if err == nil && (info == nil || rest == nil) {
			t.Fatal("no error but no info or stream")
		}
	})
}

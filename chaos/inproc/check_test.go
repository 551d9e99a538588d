package inproc

import (
	"fmt"
	"time"
)

// verdicts are the checker's findings over a history.
type verdicts struct {
	// Lost counts acknowledged binds missing, or different, on some
	// running member; LostKeys names the first few.
	Lost     int      `json:"lost_acked"`
	LostKeys []string `json:"lost_keys,omitempty"`
	// Unexpected counts binds refused before proposal that appear anyway.
	Unexpected int `json:"unexpected"`
	// HashesEqual is true when every running member reports one state
	// hash at the leader's commit index.
	HashesEqual bool `json:"hashes_equal"`
}

// ok reports whether every invariant holds.
func (v verdicts) ok() bool { return v.Lost == 0 && v.Unexpected == 0 && v.HashesEqual }

// check compares ops with the state of every running member. Call it
// after converge.
func (c *cluster) check(ops []op) verdicts {
	v := verdicts{}
	// The members may have moved on since converge (an election after the
	// load stopped commits the new leader's barrier entry, which a
	// follower applies a moment later): agreement is asked of a settled
	// cluster, so the check waits for one (10 s is a failure bound).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if v.HashesEqual, _ = c.converged(); v.HashesEqual || time.Now().After(deadline) {
			break
		}
	}
	for _, o := range ops {
		for _, m := range c.members {
			if m.node == nil {
				continue
			}
			b, present := m.node.FSM().Session(o.key)
			switch {
			case o.outcome == opOK && (!present || b.GetWorkerId() != o.worker || b.GetVersion() != o.version):
				v.Lost++
				if len(v.LostKeys) < 5 {
					v.LostKeys = append(v.LostKeys, fmt.Sprintf("%s@%s", o.key, m.id))
				}
			case o.outcome == opFail && present && b.GetWorkerId() == o.worker:
				v.Unexpected++
			}
		}
	}
	return v
}

package vllmevents

// action is what to do with a batch, given its sequence number.
type action uint8

const (
	// actFirst: no batch seen yet and no history to compare with.
	actFirst action = iota + 1
	// actApply: the batch follows the last one applied.
	actApply
	// actGap: batches are missing before this one.
	actGap
	// actDuplicate: a replay already delivered this batch.
	actDuplicate
	// actRestart: the sequence went back: a new engine incarnation.
	actRestart
)

// sequence tracks one publisher's batch sequence numbers. Over TCP a PUB
// socket neither reorders nor repeats, so a number below the expected one
// is either a batch a replay already delivered (within the replay's
// window) or the counter of a restarted engine.
type sequence struct {
	known bool
	// next is the sequence number expected next.
	next uint64
	// dupFrom..dupTo is the window of the last replay: live batches in it
	// were delivered by the replay. hasDup says whether a window is open.
	dupFrom, dupTo uint64
	hasDup         bool
}

func (q *sequence) classify(seq uint64) action {
	switch {
	case !q.known:
		return actFirst
	case seq == q.next:
		return actApply
	case seq > q.next:
		return actGap
	case q.hasDup && seq >= q.dupFrom && seq < q.dupTo:
		return actDuplicate
	}
	return actRestart
}

// applied records that batch seq was applied; a live batch past the
// replay window closes it.
func (q *sequence) applied(seq uint64, live bool) {
	q.known, q.next = true, seq+1
	if live && q.hasDup && seq >= q.dupTo {
		q.hasDup = false
	}
}

// replayed records that a replay covered [from, next).
func (q *sequence) replayed(from uint64) {
	if q.known && q.next > from {
		q.dupFrom, q.dupTo, q.hasDup = from, q.next, true
	}
}

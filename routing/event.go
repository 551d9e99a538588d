package routing

import (
	"errors"
	"fmt"
)

// EventKind says what a KV event did to a worker's cache.
type EventKind uint8

// Event kinds, mirroring the engines' stored/removed/cleared events.
const (
	EventStored EventKind = iota + 1
	EventRemoved
	EventCleared
)

// String names the kind for logs and metrics labels.
func (k EventKind) String() string {
	switch k {
	case EventStored:
		return "stored"
	case EventRemoved:
		return "removed"
	case EventCleared:
		return "cleared"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// StoredBlock is one block of a stored event: the engine's opaque id and the
// router's local hash of the block's tokens.
type StoredBlock struct {
	Engine EngineHash
	Local  LocalHash
}

// Event is one KV cache event of one worker. Event ids are assigned by the
// engine, per worker (engine and rank), starting at 1 and increasing by one;
// consumers use them to detect gaps.
type Event struct {
	Worker Worker
	ID     uint64
	Kind   EventKind
	Tier   Tier
	// Parent is the engine id of the block right before Blocks[0], valid when
	// HasParent is set. Without a parent, Blocks[0] is the first block of a
	// sequence.
	Parent    EngineHash
	HasParent bool
	// Blocks are the stored blocks in sequence order (EventStored).
	Blocks []StoredBlock
	// Removed are the engine ids of removed blocks (EventRemoved).
	Removed []EngineHash
}

// Errors returned when validating events.
var (
	ErrBadEvent = errors.New("routing: malformed KV event")
)

// Validate checks the event's shape; it does not check ids against a cursor.
func (e *Event) Validate() error {
	if !e.Tier.Valid() {
		return fmt.Errorf("%w: tier %d", ErrBadEvent, e.Tier)
	}
	switch e.Kind {
	case EventStored:
		if len(e.Blocks) == 0 {
			return fmt.Errorf("%w: stored event without blocks", ErrBadEvent)
		}
	case EventRemoved:
		if len(e.Removed) == 0 {
			return fmt.Errorf("%w: removed event without blocks", ErrBadEvent)
		}
	case EventCleared:
	default:
		return fmt.Errorf("%w: kind %d", ErrBadEvent, e.Kind)
	}
	return nil
}

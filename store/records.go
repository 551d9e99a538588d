package store

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// MaxSessionKeyBytes bounds a session or parent-group key. Keys come from
// client headers; the bound keeps one hostile key from bloating every
// snapshot and index page.
const MaxSessionKeyBytes = 512

// MaxDCBytes bounds a datacenter name inside a session binding.
const MaxDCBytes = 64

// TierMask has bit t set when a block is held on storage tier t (routing's
// Tier numbering: device 0, host 1, disk 2). Zero means "not held" and is
// never stored: a block with no tier is deleted instead.
type TierMask uint8

// Owner is one row of the ownership table: rank Rank of engine Worker holds
// block Hash (a routing sequence hash) on the tiers in Tiers.
type Owner struct {
	Worker uint64
	Rank   uint32
	Hash   uint64
	Tiers  TierMask
}

// Cursor is one row of the cursor table: the last KV event id of one engine
// rank that the FSM has applied.
type Cursor struct {
	Worker  uint64
	Rank    uint32
	EventID uint64
}

// WorkerCard is one row of the worker registry: the engine's card, encoded
// by the layer above (the store treats it as opaque bytes).
type WorkerCard struct {
	Worker uint64
	Card   []byte
}

// Session is an authoritative session binding. Key is a session id or a
// parent-group key; Parent, when set, names the group this session inherits
// its binding from.
type Session struct {
	Key    string
	Worker uint64
	Rank   uint32
	DC     string
	// Version increases on every rebind; compare-and-set commands name it.
	Version uint64
	// Fence is the raft index of the entry that created the binding; it is
	// the fencing token handed to the engine.
	Fence uint64
	// IdleDeadlineNanos is the Unix time in nanoseconds after which the
	// leader may expire the binding; it is stamped into the raft entry, never
	// read from a clock here.
	IdleDeadlineNanos int64
	Parent            string
	Active            bool
}

// sessionCodecVersion is the first byte of an encoded Session value.
const sessionCodecVersion byte = 1

// validate checks the string fields against their bounds.
func (s *Session) validate() error {
	switch {
	case s.Key == "" || len(s.Key) > MaxSessionKeyBytes || !utf8.ValidString(s.Key):
		return fmt.Errorf("%w: session key of %d bytes (want 1..%d, UTF-8)", ErrInvalidArgument, len(s.Key), MaxSessionKeyBytes)
	case len(s.Parent) > MaxSessionKeyBytes || !utf8.ValidString(s.Parent):
		return fmt.Errorf("%w: session parent of %d bytes", ErrInvalidArgument, len(s.Parent))
	case len(s.DC) > MaxDCBytes || !utf8.ValidString(s.DC):
		return fmt.Errorf("%w: session dc of %d bytes", ErrInvalidArgument, len(s.DC))
	}
	return nil
}

// encodeSession encodes every field but Key, which lives in the table key.
func encodeSession(s *Session) []byte {
	b := make([]byte, 0, 48+len(s.DC)+len(s.Parent))
	b = append(b, sessionCodecVersion)
	b = binary.BigEndian.AppendUint64(b, s.Worker)
	b = binary.BigEndian.AppendUint32(b, s.Rank)
	b = binary.BigEndian.AppendUint64(b, s.Version)
	b = binary.BigEndian.AppendUint64(b, s.Fence)
	b = binary.BigEndian.AppendUint64(b, uint64(s.IdleDeadlineNanos))
	b = append(b, boolByte(s.Active))
	b = binary.AppendUvarint(b, uint64(len(s.DC)))
	b = append(b, s.DC...)
	b = binary.AppendUvarint(b, uint64(len(s.Parent)))
	return append(b, s.Parent...)
}

// sessionFixedLen is the length of the fixed-width part of the encoding.
const sessionFixedLen = 1 + 8 + 4 + 8 + 8 + 8 + 1

// decodeSession decodes buf into a Session with the given key.
func decodeSession(key string, buf []byte) (Session, error) {
	if len(buf) < sessionFixedLen || buf[0] != sessionCodecVersion || buf[37] > 1 {
		return Session{}, fmt.Errorf("%w: session %q value", ErrCorrupt, key)
	}
	s := Session{
		Key:               key,
		Worker:            binary.BigEndian.Uint64(buf[1:]),
		Rank:              binary.BigEndian.Uint32(buf[9:]),
		Version:           binary.BigEndian.Uint64(buf[13:]),
		Fence:             binary.BigEndian.Uint64(buf[21:]),
		IdleDeadlineNanos: int64(binary.BigEndian.Uint64(buf[29:])),
		Active:            buf[37] == 1,
	}
	dc, rest, err := takeBytes(buf[sessionFixedLen:])
	if err != nil {
		return Session{}, err
	}
	parent, rest, err := takeBytes(rest)
	if err != nil || len(rest) != 0 {
		return Session{}, fmt.Errorf("%w: session %q strings", ErrCorrupt, key)
	}
	s.DC, s.Parent = string(dc), string(parent)
	if err := s.validate(); err != nil {
		return Session{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return s, nil
}

// boolByte encodes a bool as 0 or 1.
func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// checkName refuses the key of a table keyed by a name (thresholds,
// incumbents) when it is empty, over max bytes or not UTF-8.
func checkName(what, name string, max int) error {
	if name == "" || len(name) > max || !utf8.ValidString(name) {
		return fmt.Errorf("%w: %s of %d bytes (want 1..%d, UTF-8)", ErrInvalidArgument, what, len(name), max)
	}
	return nil
}

// decodeNamed decodes a row of a table keyed by a name: the name after
// the prefix byte, and a copy of the value.
func decodeNamed(table byte, what string, k, v []byte) (name string, value []byte, err error) {
	if len(k) < 2 || k[0] != table {
		return "", nil, fmt.Errorf("%w: %s key %x", ErrCorrupt, what, k)
	}
	return string(k[1:]), append([]byte(nil), v...), nil
}

// decodeOwner decodes an ownership key and value.
func decodeOwner(k, v []byte) (Owner, error) {
	if len(k) != ownerKeyLen || k[0] != tableOwner || len(v) != 1 || v[0] == 0 {
		return Owner{}, fmt.Errorf("%w: owner row %x=%x", ErrCorrupt, k, v)
	}
	return Owner{
		Worker: binary.BigEndian.Uint64(k[1:]),
		Rank:   binary.BigEndian.Uint32(k[9:]),
		Hash:   binary.BigEndian.Uint64(k[13:]),
		Tiers:  TierMask(v[0]),
	}, nil
}

// decodeCursor decodes a cursor key and value.
func decodeCursor(k, v []byte) (Cursor, error) {
	if len(k) != cursorKeyLen || k[0] != tableCursor || len(v) != 8 {
		return Cursor{}, fmt.Errorf("%w: cursor row %x=%x", ErrCorrupt, k, v)
	}
	return Cursor{
		Worker:  binary.BigEndian.Uint64(k[1:]),
		Rank:    binary.BigEndian.Uint32(k[9:]),
		EventID: binary.BigEndian.Uint64(v),
	}, nil
}

// decodeWorker decodes a worker key and value, copying the card.
func decodeWorker(k, v []byte) (WorkerCard, error) {
	if len(k) != workerKeyLen || k[0] != tableWorker {
		return WorkerCard{}, fmt.Errorf("%w: worker key %x", ErrCorrupt, k)
	}
	return WorkerCard{Worker: binary.BigEndian.Uint64(k[1:]), Card: append([]byte{}, v...)}, nil
}

// decodeSessionRow decodes a session key and value.
func decodeSessionRow(k, v []byte) (Session, error) {
	if len(k) < 2 || k[0] != tableSession {
		return Session{}, fmt.Errorf("%w: session key %x", ErrCorrupt, k)
	}
	return decodeSession(string(k[1:]), v)
}

package consensus

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// Type is a raft command's type byte. The low seven bits are the command
// number; the high bit (IgnoreIfUnknown) tells a node that does not know
// the number to skip the entry instead of halting, which is how an
// optional command can be rolled out before every node is upgraded.
type Type uint8

// IgnoreIfUnknown is the type byte's high bit.
const IgnoreIfUnknown Type = 0x80

// Command numbers. They are never reused: a retired command keeps its
// number reserved here as a comment.
const (
	TypeBindSession      Type = 1
	TypeTouchSessions    Type = 2
	TypeReleaseSessions  Type = 3
	TypeUnbindSession    Type = 4
	TypeExpireSessions   Type = 5
	TypeInvalidateEngine Type = 6
	TypeKVEvents         Type = 7
	TypeRegisterWorker   Type = 8
	TypeRemoveWorker     Type = 9
	TypeReplaceRank      Type = 10
	// TypeSetThresholds is numbered apart from the sequence so that
	// commands added on other lines of work keep their numbers; it is
	// always encoded with IgnoreIfUnknown.
	TypeSetThresholds Type = 20
	// TypeSetIncumbent is the leader's worker-set reservation
	// (incumbents.go), numbered after TypeSetThresholds for the same
	// reason and always encoded with IgnoreIfUnknown.
	TypeSetIncumbent Type = 21
)

// payloadVersion is the version byte of every current payload. A payload
// version a node does not know is treated like an unknown type.
const payloadVersion = 1

// headerBytes is the envelope before the protobuf payload: type, version.
const headerBytes = 2

// Number is the command number without the ignore bit.
func (t Type) Number() uint8 { return uint8(t &^ IgnoreIfUnknown) }

// Ignorable reports whether the ignore-if-unknown bit is set.
func (t Type) Ignorable() bool { return t&IgnoreIfUnknown != 0 }

// String names the command for logs.
func (t Type) String() string {
	if s, ok := commands[t&^IgnoreIfUnknown]; ok {
		return s.name
	}
	return fmt.Sprintf("command(%d)", t.Number())
}

// spec is one row of the dispatch table.
type spec struct {
	name string
	new  func() proto.Message
	// apply runs the command on the FSM at the entry's index.
	apply func(f *FSM, index uint64, m proto.Message) *kvrpb.RaftResult
	// applyFast, when set, applies the command straight from its payload
	// bytes; ok false (a payload it does not take) leaves the entry to
	// decode and apply, unchanged.
	applyFast func(f *FSM, index uint64, payload []byte) (r *kvrpb.RaftResult, ok bool)
	// stamp sets the leader's clock in the payload, when it carries one.
	stamp func(m proto.Message, unixNanos int64)
	// validate checks a payload before it is proposed, so that the log
	// holds only well-formed entries.
	validate func(m proto.Message) error
	// needsReady marks commands a leader serves only after its barrier.
	needsReady bool
	// ignorable commands are encoded with IgnoreIfUnknown, so that nodes
	// of an older build skip them.
	ignorable bool
}

// typed is a row of the dispatch table written against its payload type
// M; row converts it to a spec, so that no row casts its payload. A nil
// stamp means the payload carries no clock, a nil validate that every
// payload is valid.
type typed[M proto.Message] struct {
	name                  string
	apply                 func(f *FSM, index uint64, m M) *kvrpb.RaftResult
	applyFast             func(f *FSM, index uint64, payload []byte) (*kvrpb.RaftResult, bool)
	stamp                 func(m M, unixNanos int64)
	validate              func(m M) error
	needsReady, ignorable bool
}

// row returns the spec of t.
func (t typed[M]) row() spec {
	s := spec{
		name:      t.name,
		new:       func() proto.Message { var m M; return m.ProtoReflect().New().Interface() },
		apply:     func(f *FSM, i uint64, m proto.Message) *kvrpb.RaftResult { return t.apply(f, i, m.(M)) },
		applyFast: t.applyFast, needsReady: t.needsReady, ignorable: t.ignorable,
		stamp:    func(proto.Message, int64) {},
		validate: func(proto.Message) error { return nil },
	}
	if t.stamp != nil {
		s.stamp = func(m proto.Message, unixNanos int64) { t.stamp(m.(M), unixNanos) }
	}
	if t.validate != nil {
		s.validate = func(m proto.Message) error { return t.validate(m.(M)) }
	}
	return s
}

// commands is the dispatch table, keyed by type without the ignore bit.
var commands = map[Type]spec{
	TypeBindSession:      bindSpec,
	TypeTouchSessions:    touchSpec,
	TypeReleaseSessions:  releaseSpec,
	TypeUnbindSession:    unbindSpec,
	TypeExpireSessions:   expireSpec,
	TypeInvalidateEngine: invalidateEngineSpec,
	TypeKVEvents:         kvEventsSpec,
	TypeRegisterWorker:   registerWorkerSpec,
	TypeRemoveWorker:     removeWorkerSpec,
	TypeReplaceRank:      replaceRankSpec,
	TypeSetThresholds:    setThresholdsSpec,
	TypeSetIncumbent:     setIncumbentSpec,
}

// typeOf maps a payload's message name to its type, for Encode.
var typeOf = func() map[protoreflect.FullName]Type {
	m := make(map[protoreflect.FullName]Type, len(commands))
	for t, s := range commands {
		m[s.new().ProtoReflect().Descriptor().FullName()] = t
	}
	return m
}()

// Encode validates a command payload (one of the kvrpb.Raft* command
// messages) and returns its log entry bytes: type byte, version byte,
// deterministic protobuf.
func Encode(m proto.Message) ([]byte, error) {
	t, err := commandType(m)
	if err != nil {
		return nil, err
	}
	if err := commands[t].validate(m); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadCommand, commands[t].name, err)
	}
	return encodeTyped(t, m)
}

// commandType returns the type of a command payload, or ErrBadCommand.
func commandType(m proto.Message) (Type, error) {
	if m == nil {
		return 0, fmt.Errorf("%w: nil command", ErrBadCommand)
	}
	name := m.ProtoReflect().Descriptor().FullName()
	t, ok := typeOf[name]
	if !ok {
		return 0, fmt.Errorf("%w: %s is not a command", ErrBadCommand, name)
	}
	return t, nil
}

// deterministic is how every payload is marshalled.
var deterministic = proto.MarshalOptions{Deterministic: true}

// encodeTyped marshals m behind the envelope for type t.
func encodeTyped(t Type, m proto.Message) ([]byte, error) {
	if commands[t&^IgnoreIfUnknown].ignorable {
		t |= IgnoreIfUnknown
	}
	buf := []byte{byte(t), payloadVersion}
	out, err := deterministic.MarshalAppend(buf, m)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	return out, nil
}

// applyFast runs a command's fast apply when its entry has one and takes
// the payload.
func (f *FSM) applyFast(index uint64, data []byte) (*kvrpb.RaftResult, bool) {
	if len(data) < headerBytes || data[1] != payloadVersion {
		return nil, false
	}
	s, ok := commands[Type(data[0])&^IgnoreIfUnknown]
	if !ok || s.applyFast == nil {
		return nil, false
	}
	return s.applyFast(f, index, data[headerBytes:])
}

// decoded is a decoded entry: its type, and its payload unless the type
// is unknown and ignorable (then skip is set).
type decoded struct {
	t    Type
	m    proto.Message
	skip bool
}

// decode parses entry bytes. An unknown type or version without the
// ignore bit, or a payload that does not unmarshal, is an error: the FSM
// must halt on it.
func decode(data []byte) (decoded, error) {
	if len(data) < headerBytes {
		return decoded{}, fmt.Errorf("entry of %d bytes has no header", len(data))
	}
	t := Type(data[0])
	s, known := commands[t&^IgnoreIfUnknown]
	if !known || data[1] != payloadVersion {
		if t.Ignorable() {
			return decoded{t: t, skip: true}, nil
		}
		return decoded{}, fmt.Errorf("unknown command %d version %d", t.Number(), data[1])
	}
	m := s.new()
	if err := proto.Unmarshal(data[headerBytes:], m); err != nil {
		return decoded{}, fmt.Errorf("%s payload: %w", s.name, err)
	}
	return decoded{t: t &^ IgnoreIfUnknown, m: m}, nil
}

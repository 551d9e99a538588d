package consensus

import "github.com/kvrouter/kvrouter/proto/kvrpb"

// Code is a command's business outcome, RaftResult.code. Codes are part
// of the replicated behaviour and are never renumbered.
type Code uint32

// Result codes.
const (
	// CodeOK: the command applied.
	CodeOK Code = 0
	// CodeConflict: a bind lost its compare-and-set; the result carries
	// the live binding, if any.
	CodeConflict Code = 1
	// CodeInvalid: the payload failed the FSM's checks; nothing changed.
	CodeInvalid Code = 2
	// CodeSessionLimit: a bind of a new key would exceed max_sessions.
	CodeSessionLimit Code = 3
	// CodeIgnored: an unknown command marked ignore-if-unknown.
	CodeIgnored Code = 4
)

// codeNames names the codes for logs.
var codeNames = [...]string{CodeOK: "ok", CodeConflict: "conflict", CodeInvalid: "invalid",
	CodeSessionLimit: "session_limit", CodeIgnored: "ignored"}

// String names the code for logs.
func (c Code) String() string {
	if uint64(c) < uint64(len(codeNames)) {
		return codeNames[c]
	}
	return "code(?)"
}

// result builds a result with a code.
func result(c Code) *kvrpb.RaftResult { return &kvrpb.RaftResult{Code: uint32(c)} }

// counted builds an OK result with a count.
func counted(n int) *kvrpb.RaftResult { return &kvrpb.RaftResult{Count: uint64(n)} }

package gateway

import (
	"slices"

	"github.com/zeebo/xxh3"
)

// Homes ranks the DCs of a federation for each session by rendezvous
// (highest random weight) hashing: every gateway given the same DC names
// computes the same ranking without coordination, and adding or removing
// a DC moves only the sessions whose first choice it is or was. The first
// DC of a session's ranking is its home. Homes is immutable.
type Homes struct {
	dcs []string
}

// NewHomes returns the ranking over dcs (order and duplicates do not
// matter).
func NewHomes(dcs ...string) Homes {
	s := slices.Clone(dcs)
	slices.Sort(s)
	return Homes{dcs: slices.Compact(s)}
}

// Home returns the session's home DC ("" when there are no DCs).
func (h Homes) Home(session string) string {
	best, bestScore := "", uint64(0)
	for _, dc := range h.dcs {
		if s := score(dc, session); best == "" || s > bestScore {
			best, bestScore = dc, s
		}
	}
	return best
}

// Prefer returns whichever of a and b ranks first for session: the rule
// that settles a session bound in two DCs.
func (h Homes) Prefer(session, a, b string) string {
	sa, sb := score(a, session), score(b, session)
	if sa > sb || sa == sb && a < b {
		return a
	}
	return b
}

// score is a DC's rendezvous weight for a session.
func score(dc, session string) uint64 {
	return xxh3.HashStringSeed(session, xxh3.HashString(dc))
}

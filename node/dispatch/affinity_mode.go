package dispatch

import "fmt"

// String names the mode as configuration spells it.
func (m AffinityMode) String() string {
	switch m {
	case AffinityHard:
		return "hard"
	case AffinitySoft:
		return "soft"
	}
	return fmt.Sprintf("affinity_mode(%d)", uint8(m))
}

// MarshalText implements encoding.TextMarshaler.
func (m AffinityMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText parses "hard" or "soft", so that configuration loaders can
// fill the field from text.
func (m *AffinityMode) UnmarshalText(b []byte) error {
	switch string(b) {
	case "hard":
		*m = AffinityHard
	case "soft":
		*m = AffinitySoft
	default:
		return configError("affinity_mode: must be hard or soft, got %q", b)
	}
	return nil
}

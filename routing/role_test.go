package routing

import (
	"errors"
	"testing"
)

func TestParseRole(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Role
		err  bool
	}{
		{name: "empty is aggregated", in: "", want: RoleAggregated},
		{name: "aggregated", in: "aggregated", want: RoleAggregated},
		{name: "prefill", in: "prefill", want: RolePrefill},
		{name: "decode", in: "decode", want: RoleDecode},
		{name: "misspelt", in: "Decode", err: true},
		{name: "unknown", in: "encode", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRole(tc.in)
			if tc.err {
				if !errors.Is(err, ErrUnknownRole) {
					t.Fatalf("ParseRole(%q) = %v, %v; want ErrUnknownRole", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want || (tc.in != "" && got.String() != tc.in) {
				t.Fatalf("ParseRole(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

package extproc

import (
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestExtProcSubsetHintIsRead: the hint is the list under the
// protocol's namespace and key; a key that is set restricts even when
// nothing in it is usable; a missing namespace or key does not.
func TestExtProcSubsetHintIsRead(t *testing.T) {
	md := func(v *structpb.Value) *corev3.Metadata {
		return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
			SubsetNamespace: {Fields: map[string]*structpb.Value{SubsetKey: v}}}}
	}
	list := func(vs ...any) *structpb.Value {
		l, err := structpb.NewList(vs)
		if err != nil {
			t.Fatal(err)
		}
		return structpb.NewListValue(l)
	}
	for _, tc := range []struct {
		name string
		md   *corev3.Metadata
		want []string
		set  bool
	}{
		{"none", nil, nil, false},
		{"another namespace", &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.lb": {}}}, nil, false},
		{"list", md(list("10.0.0.1:8000", "10.0.0.2:8000")), []string{"10.0.0.1:8000", "10.0.0.2:8000"}, true},
		{"empty list", md(list()), []string{}, true},
		{"entries that are not strings", md(list(1.0, "10.0.0.1:8000")), []string{"10.0.0.1:8000"}, true},
		{"a string", md(structpb.NewStringValue("10.0.0.1:8000,10.0.0.2:8000")), []string{"10.0.0.1:8000", "10.0.0.2:8000"}, true},
		{"a number", md(structpb.NewNumberValue(3)), []string{}, true},
	} {
		got, set := subsetHint(tc.md)
		if set != tc.set || !slices.Equal(got, tc.want) || (set && got == nil) {
			t.Errorf("%s: %q set=%v, want %q set=%v", tc.name, got, set, tc.want, tc.set)
		}
	}
}

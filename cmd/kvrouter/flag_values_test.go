package main

import (
	"testing"

	"github.com/spf13/pflag"
)

// TestCommandLineNameOfAnOptionBeatsItsOtherNames: an option set on the
// command line under one name is not overridden by the file or the
// environment under another, whichever way the names sort.
func TestCommandLineNameOfAnOptionBeatsItsOtherNames(t *testing.T) {
	for _, tc := range []struct{ name, arg, key string }{
		{"file name sorts first", "--z-level=3", "a_level: 7\n"},
		{"file name sorts last", "--a-level=3", "z_level: 7\n"},
		{"file names the option", "--a-level=3", "level: 7\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var level int
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			fs.IntVar(&level, "level", 1, "")
			addAlias(fs, "a-level", "level", "")
			addAlias(fs, "z-level", "level", "")
			if err := fs.Parse([]string{tc.arg}); err != nil {
				t.Fatal(err)
			}
			if err := resolveConfig(fs, writeYAML(t, tc.key), []string{"KVR_A_LEVEL=9", "KVR_Z_LEVEL=9", "KVR_LEVEL=9"}); err != nil {
				t.Fatal(err)
			}
			if level != 3 {
				t.Fatalf("level %d, want the command line's 3", level)
			}
		})
	}
}

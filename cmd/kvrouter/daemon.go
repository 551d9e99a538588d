package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// daemonFlags are the options every long-running subcommand (node, relay,
// mocker) shares: its file of options and its logging.
type daemonFlags struct {
	configPath string
	log        logFlags
}

// registerConfig registers --config.
func (d *daemonFlags) registerConfig(fs *pflag.FlagSet) {
	fs.StringVar(&d.configPath, "config", "", "YAML file of options; keys are flag names with underscores\n"+
		"KVR_CONFIG names it when the flag does not. Precedence: default < file < KVR_* environment < flag.")
}

// newDaemonCmd completes cmd, a long-running subcommand: register adds its
// flags and its grouped help, and running it resolves its options from
// every source (resolveConfig), builds its logger and calls run.
func newDaemonCmd(cmd *cobra.Command, d *daemonFlags, register func(*pflag.FlagSet), run func(*cobra.Command, *slog.Logger) error) *cobra.Command {
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := resolveConfig(cmd.Flags(), d.configPath, environ()); err != nil {
			return err
		}
		log, err := d.log.logger(cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		return run(cmd, log)
	}
	register(cmd.Flags())
	installHelp(cmd)
	return cmd
}

// logFlags are the logging options every long-running subcommand shares.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&l.level, "log-level", "info", "lowest level logged: debug, info, warn, error")
	fs.StringVar(&l.format, "log-format", "text", "log record format: text or json")
}

// logger writes to w, the command's error stream (os.Stderr unless a
// test set another).
func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch l.format {
	case "text":
		return slog.New(newDedupHandler(slog.NewTextHandler(w, opts))), nil
	case "json":
		return slog.New(newDedupHandler(slog.NewJSONHandler(w, opts))), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", l.format)
}

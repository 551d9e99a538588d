package consensus

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvrouter/kvrouter/store"
)

// OpenDurableState opens the FSM store of opts and loads its tables into a
// StoreState. When the store is corrupt (a Pebble checksum failure, or a
// row that does not decode, while it is opened or loaded) it is reported
// (opts.Observer), set aside as <Dir>.corrupt-<n> for inspection, and a
// fresh, empty store is opened in its place; rebuilt is then true.
//
// Rebuilding this way is safe because the FSM tables are derived state:
// raft's log and snapshots are the record. A node started on the fresh
// store restores its newest snapshot and replays its log after it
// (restoreNewer), or, when it has neither, receives them from the leader;
// it reports itself caught up (CaughtUp) only once it applied what the
// leader committed, so the corrupt state is never served. A corrupt raft
// log is not handled here: it holds votes and acknowledged entries, and
// the node refuses to start on it (see ErrNeedsRebuild).
func OpenDurableState(opts store.Options, log *slog.Logger) (fs *store.FSMStore, st *StoreState, rebuilt bool, err error) {
	fs, st, err = openState(opts)
	if err == nil || !IsCorrupt(err) {
		return fs, st, false, err
	}
	log = cmp.Or(log, slog.New(slog.DiscardHandler))
	if opts.Observer != nil && !pebble.IsCorruptionError(err) {
		// Pebble's own checksum failures were reported by the store.
		opts.Observer.Corruption(cmp.Or(opts.Name, "fsm"), "table") // store.OpenFSM's label
	}
	aside, serr := setAsideStore(opts)
	log.Error("corrupt FSM store detected by checksum; set aside, rebuilding from the log, snapshots and peers",
		"dir", opts.Dir, "set_aside", aside, "err", err, "set_aside_err", serr)
	if serr != nil {
		return nil, nil, false, errors.Join(err, serr)
	}
	fs, st, err = openState(opts)
	return fs, st, err == nil, err
}

// openState opens the store and loads its tables.
func openState(opts store.Options) (*store.FSMStore, *StoreState, error) {
	fs, err := store.OpenFSM(opts)
	if err != nil {
		return nil, nil, err
	}
	st, err := OpenStoreState(fs)
	if err != nil {
		return nil, nil, errors.Join(err, fs.Close())
	}
	return fs, st, nil
}

// IsCorrupt reports whether err means stored bytes failed a checksum or
// did not decode (store.ErrCorrupt, or Pebble's corruption class), as
// opposed to a disk that cannot be reached or options that are wrong.
func IsCorrupt(err error) bool {
	return errors.Is(err, store.ErrCorrupt) || pebble.IsCorruptionError(err)
}

// setAsideStore renames a corrupt store's directory to the first free
// <Dir>.corrupt-<n>.
func setAsideStore(opts store.Options) (string, error) {
	fsys := opts.EnsureDefaults().FS
	for i := 1; i < 100; i++ {
		aside := fmt.Sprintf("%s.corrupt-%d", opts.Dir, i)
		if _, err := fsys.Stat(aside); err == nil {
			continue
		}
		if err := fsys.Rename(opts.Dir, aside); err != nil {
			return "", fmt.Errorf("consensus: setting %s aside: %w", opts.Dir, err)
		}
		return aside, nil
	}
	return "", fmt.Errorf("consensus: setting %s aside: 99 earlier copies are in the way", opts.Dir)
}

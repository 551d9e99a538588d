package store

import (
	"cmp"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// FormatPinned is the Pebble on-disk format major version every store is
// created at and ratcheted to. It is pinned rather than FormatNewest because
// a format ratchet is permanent: a binary upgrade must not silently make the
// data unreadable by the release it would roll back to. It is at least
// FormatWALSyncChunks, which lets WAL replay tell corruption from a torn
// tail, the property a raft log depends on.
const FormatPinned = pebble.FormatTableFormatV6

// Defaults, each chosen for the raft and FSM workloads of a router node.
const (
	// DefaultCacheBytes is the block cache size when no shared cache is
	// given: the FSM is read mostly on restart, so a small cache suffices.
	DefaultCacheBytes int64 = 32 << 20
	// DefaultMemTableBytes keeps flushes of the raft log small and frequent;
	// the log is truncated after every snapshot, so large memtables only
	// delay the reclamation of space.
	DefaultMemTableBytes uint64 = 16 << 20
)

// Options configures a LogStore or an FSMStore. The zero value with Dir set
// is valid after EnsureDefaults.
type Options struct {
	// Dir is the directory of the store; it is created if missing. Required.
	Dir string
	// FS is the file system; nil means the operating system's (vfs.Default).
	// Tests pass vfs.NewMem() or vfs.NewCrashableMem().
	FS vfs.FS
	// Cache is a block cache shared between the LogStore and the FSMStore
	// of one node. The store takes its own reference; the caller keeps and
	// releases (Unref) its own. Nil means a private cache of CacheBytes.
	Cache *pebble.Cache
	// CacheBytes sizes the private cache when Cache is nil.
	CacheBytes int64
	// MemTableBytes is Pebble's memtable size.
	MemTableBytes uint64
	// FormatMajorVersion is the Pebble format to create or ratchet to. Zero
	// means FormatPinned; values below FormatWALSyncChunks are refused.
	FormatMajorVersion pebble.FormatMajorVersion
	// Logger receives Pebble's log lines; nil means slog.Default().
	Logger *slog.Logger
	// MinFreeBytes is the free space kept in reserve (diskguard.go): below
	// it raft log appends and FSM commits fail with ErrDiskFull. Zero
	// means DefaultMinFreeBytes.
	MinFreeBytes uint64
	// Name labels the store in Observer events ("raft", "fsm").
	Name string
	// Observer receives disk-full, write-error and corruption events; nil
	// receives nothing.
	Observer Observer
}

// EnsureDefaults fills every zero field with its default and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	o.CacheBytes = cmp.Or(o.CacheBytes, DefaultCacheBytes)
	o.MemTableBytes = cmp.Or(o.MemTableBytes, DefaultMemTableBytes)
	o.FormatMajorVersion = cmp.Or(o.FormatMajorVersion, FormatPinned) // zero is pebble.FormatDefault
	o.Logger = cmp.Or(o.Logger, slog.Default())
	o.MinFreeBytes = cmp.Or(o.MinFreeBytes, DefaultMinFreeBytes)
	return o
}

// Validate reports the first invalid field by its name. It expects
// EnsureDefaults to have run.
func (o *Options) Validate() error {
	switch {
	case o.Dir == "":
		return fmt.Errorf("%w: Options.Dir is empty", ErrInvalidOptions)
	case o.FS == nil:
		return fmt.Errorf("%w: Options.FS is nil", ErrInvalidOptions)
	case o.Cache == nil && o.CacheBytes < 0:
		return fmt.Errorf("%w: Options.CacheBytes %d is negative", ErrInvalidOptions, o.CacheBytes)
	case o.MemTableBytes < 1<<20 || o.MemTableBytes >= 4<<30:
		return fmt.Errorf("%w: Options.MemTableBytes %d outside [1 MiB, 4 GiB)", ErrInvalidOptions, o.MemTableBytes)
	case o.FormatMajorVersion < pebble.FormatWALSyncChunks || o.FormatMajorVersion > pebble.FormatNewest:
		return fmt.Errorf("%w: Options.FormatMajorVersion %d outside [%d, %d]", ErrInvalidOptions,
			o.FormatMajorVersion, pebble.FormatWALSyncChunks, pebble.FormatNewest)
	}
	return nil
}

// prepare copies o, applies defaults and validates the copy, so callers'
// values are never mutated.
func (o Options) prepare() (Options, error) {
	o.EnsureDefaults()
	return o, o.Validate()
}

// pebbleOptions builds the Pebble options for dir. The returned release
// function drops the private cache reference once the DB holds its own.
func (o *Options) pebbleOptions() (*pebble.Options, func()) {
	cache, release := o.Cache, func() {}
	if cache == nil {
		cache = pebble.NewCache(o.CacheBytes)
		release = cache.Unref
	}
	po := &pebble.Options{
		FS:                 o.FS,
		Cache:              cache,
		MemTableSize:       o.MemTableBytes,
		FormatMajorVersion: o.FormatMajorVersion,
		Logger:             slogLogger{o.Logger.With("component", "pebble", "dir", o.Dir)},
		EventListener:      o.eventListener(),
	}
	return po, release
}

// eventListener reports corruption Pebble finds instead of letting it
// call Logger.Fatalf, its default: a corrupt sstable met by a background
// compaction would otherwise crash the process, and again after every
// restart. Reported, the corruption fails the reads that meet it with an
// error Pebble marks as corruption (pebble.IsCorruptionError), which the
// caller acts on: consensus.OpenDurableState sets a corrupt FSM store
// aside and rebuilds it.
func (o *Options) eventListener() *pebble.EventListener {
	l := o.Logger.With("component", "pebble", "dir", o.Dir)
	obs, name := o.Observer, o.Name
	return &pebble.EventListener{DataCorruption: func(info pebble.DataCorruptionInfo) {
		l.Error("on-disk corruption detected by checksum", "path", info.Path, "err", info.Details)
		if obs != nil {
			obs.Corruption(name, "table")
		}
	}}
}

// slogLogger bridges Pebble's printf-style Logger to slog, so Pebble's lines
// ("Found 0 WALs" and the like) reach the node's structured log instead of
// the standard library logger.
type slogLogger struct{ l *slog.Logger }

// Infof logs at info level.
func (s slogLogger) Infof(format string, args ...any) { s.l.Info(fmt.Sprintf(format, args...)) }

// Errorf logs at error level.
func (s slogLogger) Errorf(format string, args ...any) { s.l.Error(fmt.Sprintf(format, args...)) }

// Fatalf logs at error level and panics: Pebble calls it only on a broken
// internal invariant, after which continuing could corrupt the store.
func (s slogLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.l.Error(msg, "fatal", true)
	panic("pebble: " + msg)
}

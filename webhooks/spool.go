package webhooks

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sepipe/sepipe/service"
)

// The spool is where webhook events become durable before the receiver
// answers 2xx, and where they wait to be loaded into the warehouse.
//
// It is a folder of append-only segment files, <dir>/<16 digits>.seg. A
// record is
//
//	uint32 big-endian length of payload | uint32 CRC-32C of payload | payload
//
// and the payload is the event: id, type, subscription and raw JSON as
// uvarint-length-prefixed bytes, then time (0 or Unix nanoseconds + 1) and
// received_at as varints. Appends are group-committed: one goroutine writes
// whatever accumulated since its last write and fsyncs once; every Accept
// waits for the fsync that covers its record. A new segment file is made
// durable (fsync of the folder) before any record in it is acknowledged.
//
// A failed write or fsync (a full disk) fails the Accepts of that commit
// alone: the service retries them. The segment is truncated back to its
// last whole record, so the next commit appends after it once there is
// space again; when that truncate (or its fsync) fails, bytes of the
// failed commit may stay at the segment's end, and the next commit starts
// a new segment instead of writing after them (replay cuts them off, or
// loads a record that was written whole but not acknowledged: the
// warehouse's primary key drops it if the retry is loaded too).
//
// Opening a spool replays it: every whole record becomes an unloaded event
// again; a torn record (short header, short payload, zero or absurd
// length, checksum mismatch), which only a crash mid-write (or a failed
// commit that could not be cut off) leaves at the end of a segment, is cut
// off with everything after it. After a load commits, MarkLoaded removes
// the segments whose events are all in the warehouse.
//
// The spool does not lock its folder; its owner makes sure one process
// uses it (Listen holds a lock file).

// ErrSpoolClosed is returned by Accept after Close.
var ErrSpoolClosed = errors.New("webhooks: spool closed")

// ErrEventTooLarge is wrapped by Accept for an event whose record would be
// longer than a spool record may be (64 MiB): replay would take it for a
// torn write. The Receiver answers it 413.
var ErrEventTooLarge = errors.New("webhooks: event too large for the spool")

// Spool defaults.
const (
	DefaultSpoolSegmentSize = 4 << 20 // bytes before a segment is rotated
	DefaultDedupWindow      = 100_000 // event ids remembered for deduplication
	maxSpoolRecord          = 64 << 20
	spoolHeader             = 8
	spoolExt                = ".seg"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SpoolOption configures a Spool.
type SpoolOption func(*Spool)

// WithSegmentSize sets the size after which the spool starts a new segment.
func WithSegmentSize(n int64) SpoolOption { return func(s *Spool) { s.segMax = n } }

// WithDedupWindow sets how many of the most recent event ids the spool
// remembers to answer redeliveries as duplicates (default
// DefaultDedupWindow). Older redeliveries are spooled again and dropped
// by the loader's INSERT OR IGNORE.
func WithDedupWindow(n int) SpoolOption { return func(s *Spool) { s.window = n } }

// WithSpoolLogger sets where replay repairs and removals are logged.
func WithSpoolLogger(l *slog.Logger) SpoolOption { return func(s *Spool) { s.log = l } }

// Spool is the durable queue of accepted webhook events. It implements
// EventSink. Its methods are safe for concurrent use.
type Spool struct {
	dir    string
	segMax int64
	window int
	log    *slog.Logger

	mu       sync.Mutex
	pend     *commit            // records waiting for the next write+fsync
	seq      uint64             // last sequence number given
	ids      map[string]*commit // the dedup window: id -> the commit that made it durable
	ring     []string           // ids in the order they entered the window
	ringPos  int                //
	unloaded []spooled          // durable, not yet in the warehouse, by seq
	closed   bool               //
	wake     chan struct{}      // tells the committer there is work
	ready    chan struct{}      // tells the loader there are new unloaded events
	quit     chan struct{}      // closed by Close
	stopped  chan struct{}      // closed when the committer has exited
	durable  *commit            // the already-closed commit of replayed and seeded ids
	fmu      sync.Mutex         // the files: held while writing, syncing, rotating, removing
	f        segFile            // the active segment
	torn     bool               // the active segment may end in bytes of a failed commit: start a new one
	segs     []segment          // every segment, the active one last
}

// segFile is an open segment (an *os.File; tests wrap it to fail).
type segFile interface {
	Write(b []byte) (int, error)
	Sync() error
	Truncate(size int64) error
	Close() error
}

type segment struct {
	num     int64
	size    int64
	lastSeq uint64 // of the last record in it; 0 if none
}

type spooled struct {
	seq uint64
	ev  service.Event
}

// commit is one group commit: the records one write and one fsync cover.
type commit struct {
	buf     []byte
	recs    []spooled
	lastSeq uint64
	done    chan struct{} // closed after the fsync; err is set before
	err     error
}

var _ EventSink = (*Spool)(nil)

// OpenSpool opens (creating if needed) the spool in dir and replays it.
func OpenSpool(dir string, opts ...SpoolOption) (*Spool, error) {
	s := &Spool{dir: dir, segMax: DefaultSpoolSegmentSize, window: DefaultDedupWindow,
		log: slog.New(slog.DiscardHandler), ids: map[string]*commit{},
		wake: make(chan struct{}, 1), ready: make(chan struct{}, 1),
		quit: make(chan struct{}), stopped: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	if s.segMax <= 0 || s.window <= 0 {
		return nil, fmt.Errorf("webhooks: spool %s: segment size and dedup window must be positive", dir)
	}
	s.ring = make([]string, s.window)
	s.durable = &commit{done: make(chan struct{})}
	close(s.durable.done)
	s.pend = &commit{done: make(chan struct{})}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("webhooks: spool %s: %w", dir, err)
	}
	if err := s.replay(); err != nil {
		return nil, err
	}
	var next int64 = 1
	if n := len(s.segs); n > 0 {
		next = s.segs[n-1].num + 1
	}
	if err := s.newSegment(next); err != nil {
		return nil, err
	}
	if len(s.unloaded) > 0 {
		s.signalReady()
	}
	go s.committer()
	return s, nil
}

// Dir is the spool's folder.
func (s *Spool) Dir() string { return s.dir }

func segName(num int64) string { return fmt.Sprintf("%016d%s", num, spoolExt) }

// replay reads every segment, cutting off a torn tail.
func (s *Spool) replay() error {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("webhooks: spool %s: %w", s.dir, err)
	}
	var nums []int64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), spoolExt)
		if !ok || e.IsDir() {
			continue
		}
		n, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			continue
		}
		nums = append(nums, n)
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	for _, n := range nums {
		path := filepath.Join(s.dir, segName(n))
		evs, good, size, err := readSegment(path)
		if err != nil {
			return fmt.Errorf("webhooks: spool segment %s: %w", path, err)
		}
		if good < size {
			s.log.Warn("spool: cutting off a torn record (a crash mid-write)", "segment", path,
				"kept_bytes", good, "dropped_bytes", size-good)
			if err := truncateSync(path, good); err != nil {
				return fmt.Errorf("webhooks: spool segment %s: truncate torn tail: %w", path, err)
			}
		}
		seg := segment{num: n, size: good}
		for _, ev := range evs {
			s.seq++
			s.unloaded = append(s.unloaded, spooled{seq: s.seq, ev: ev})
			if _, ok := s.ids[ev.ID]; !ok {
				s.remember(ev.ID, s.durable)
			}
			seg.lastSeq = s.seq
		}
		s.segs = append(s.segs, seg)
	}
	return nil
}

// readSegment returns the events of the whole records of a segment and
// the length of the prefix they fill.
func readSegment(path string) (evs []service.Event, good, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, 0, err
	}
	size = st.Size()
	r := bufio.NewReaderSize(f, 1<<16)
	var hdr [spoolHeader]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return evs, good, size, nil // EOF, or a torn header
		}
		n := binary.BigEndian.Uint32(hdr[0:4])
		if n == 0 || n > maxSpoolRecord || int64(n) > size-good-spoolHeader {
			return evs, good, size, nil
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return evs, good, size, nil
		}
		if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(hdr[4:8]) {
			return evs, good, size, nil
		}
		ev, err := decodeEvent(payload)
		if err != nil {
			return evs, good, size, nil // checksummed yet unreadable: treat as torn
		}
		evs = append(evs, ev)
		good += spoolHeader + int64(n)
	}
}

func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// newSegment creates segment num, makes its name durable and makes it the
// active one. s.fmu is held (or the spool is not running yet).
func (s *Spool) newSegment(num int64) error {
	path := filepath.Join(s.dir, segName(num))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("webhooks: spool: create segment: %w", err)
	}
	if err := fsyncDir(s.dir); err != nil {
		f.Close()
		return fmt.Errorf("webhooks: spool: sync folder: %w", err)
	}
	if s.f != nil {
		s.f.Close()
	}
	s.f, s.torn = f, false
	s.segs = append(s.segs, segment{num: num})
	return nil
}

// fsyncDir syncs a folder, reporting its error: a segment must not be used
// before its name is durable.
func fsyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// remember puts id in the dedup window, evicting the oldest; s.mu held.
func (s *Spool) remember(id string, c *commit) {
	if old := s.ring[s.ringPos]; old != "" {
		delete(s.ids, old)
	}
	s.ring[s.ringPos] = id
	s.ringPos = (s.ringPos + 1) % len(s.ring)
	s.ids[id] = c
}

// Remember adds ids already stored elsewhere (the warehouse) to the dedup
// window, so their redeliveries are answered as duplicates.
func (s *Spool) Remember(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if _, ok := s.ids[id]; !ok {
			s.remember(id, s.durable)
		}
	}
}

// Accept appends ev and returns once it is on disk (fsynced), or once the
// fsync that covers an earlier record of the same id is. duplicate is true
// for an id already in the dedup window. A failed write or fsync fails
// the Accepts whose records it carried (and lets a redelivery of their ids
// be stored again); the commits after it are tried afresh. An event whose
// record would be longer than 64 MiB is refused (ErrEventTooLarge) and
// nothing is written.
func (s *Spool) Accept(ctx context.Context, ev *service.Event) (duplicate bool, err error) {
	rec := encodeRecord(ev)
	if n := len(rec) - spoolHeader; n > maxSpoolRecord {
		return false, fmt.Errorf("%w: event %.64q: a record of %d bytes, more than the limit of %d", ErrEventTooLarge, ev.ID, n, maxSpoolRecord)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false, ErrSpoolClosed
	}
	c, dup := s.ids[ev.ID]
	if !dup {
		c = s.pend
		s.seq++
		c.buf = append(c.buf, rec...)
		c.recs = append(c.recs, spooled{seq: s.seq, ev: *ev})
		c.lastSeq = s.seq
		s.remember(ev.ID, c)
	}
	s.mu.Unlock()
	if !dup {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	select {
	case <-c.done:
		if c.err != nil {
			return false, c.err
		}
		return dup, nil
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
}

// committer writes and fsyncs what Accept gathered, one group at a time.
func (s *Spool) committer() {
	defer close(s.stopped)
	for {
		quitting := false
		select {
		case <-s.wake:
		case <-s.quit:
			quitting = true
		}
		for {
			s.mu.Lock()
			c := s.pend
			if len(c.recs) == 0 {
				s.mu.Unlock()
				break
			}
			s.pend = &commit{done: make(chan struct{})}
			s.mu.Unlock()
			s.fmu.Lock()
			err := s.write(c)
			s.fmu.Unlock()
			s.mu.Lock()
			if err != nil {
				err = fmt.Errorf("webhooks: spool %s: %w", s.dir, err)
				for _, r := range c.recs {
					if s.ids[r.ev.ID] == c {
						delete(s.ids, r.ev.ID) // not stored: a redelivery must not pass as duplicate
					}
				}
			} else {
				s.unloaded = append(s.unloaded, c.recs...)
			}
			c.err = err
			c.buf, c.recs = nil, nil
			close(c.done)
			s.mu.Unlock()
			if err == nil {
				s.signalReady()
			}
		}
		if quitting {
			return
		}
	}
}

// write appends c to the active segment, fsyncs, and rotates a full
// segment; s.fmu held. After a failed write or fsync it cuts the segment
// back to its last whole record (cutBack).
func (s *Spool) write(c *commit) error {
	if s.torn {
		if err := s.newSegment(s.segs[len(s.segs)-1].num + 1); err != nil {
			return fmt.Errorf("start a new segment after a failed commit: %w", err)
		}
	}
	seg := &s.segs[len(s.segs)-1]
	if _, err := s.f.Write(c.buf); err != nil {
		s.cutBack(seg)
		return fmt.Errorf("write segment %s: %w", segName(seg.num), err)
	}
	if err := s.f.Sync(); err != nil {
		s.cutBack(seg)
		return fmt.Errorf("fsync segment %s: %w", segName(seg.num), err)
	}
	seg.size += int64(len(c.buf))
	seg.lastSeq = c.lastSeq
	if seg.size >= s.segMax {
		// c is durable whatever happens here: a segment that cannot be
		// rotated grows, and the next commit tries again.
		if err := s.newSegment(seg.num + 1); err != nil {
			s.log.Warn("spool: could not start a new segment; appending to the full one", "segment", segName(seg.num), "error", err)
		}
	}
	return nil
}

// cutBack truncates the active segment seg to its last whole record after
// a failed write or fsync, and syncs it; when either fails, bytes of the
// failed commit may remain, and the next write starts a new segment
// instead (s.torn). s.fmu held.
func (s *Spool) cutBack(seg *segment) {
	err := s.f.Truncate(seg.size)
	if err == nil {
		err = s.f.Sync()
	}
	if err != nil {
		s.torn = true
		s.log.Warn("spool: could not cut a failed commit off its segment; the next commit starts a new one",
			"segment", segName(seg.num), "error", err)
	}
}

func (s *Spool) signalReady() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready is signalled (without blocking; one pending signal at most) when
// events become durable and wait to be loaded.
func (s *Spool) Ready() <-chan struct{} { return s.ready }

// Pending is the number of durable events not yet marked loaded.
func (s *Spool) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.unloaded)
}

// oldestPending is when the oldest durable event not yet loaded was
// received (zero when none waits).
func (s *Spool) oldestPending() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.unloaded) == 0 {
		return time.Time{}
	}
	return s.unloaded[0].ev.ReceivedAt
}

// Unloaded returns up to max durable events not yet marked loaded, oldest
// first, and the position to pass to MarkLoaded once they are in the
// warehouse (0 when there are none).
func (s *Spool) Unloaded(max int) (evs []service.Event, upTo uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(max, len(s.unloaded))
	if n <= 0 {
		return nil, 0
	}
	evs = make([]service.Event, n)
	for i := range n {
		evs[i] = s.unloaded[i].ev
	}
	return evs, s.unloaded[n-1].seq
}

// MarkLoaded records that every event up to upTo is in the warehouse and
// removes the segments that hold nothing else. The active segment is
// replaced by an empty one when all of it is loaded (after Close, it is
// just removed). Call it only after the load has committed.
func (s *Spool) MarkLoaded(upTo uint64) error {
	s.mu.Lock()
	i := sort.Search(len(s.unloaded), func(i int) bool { return s.unloaded[i].seq > upTo })
	s.unloaded = append(s.unloaded[:0:0], s.unloaded[i:]...)
	s.mu.Unlock()

	s.fmu.Lock()
	defer s.fmu.Unlock()
	closed := s.f == nil // after Close nothing is appended: the last segment may go too
	active := s.segs[len(s.segs)-1]
	if !closed && active.size > 0 && active.lastSeq <= upTo {
		if err := s.newSegment(active.num + 1); err != nil {
			return err
		}
	}
	last := s.segs[len(s.segs)-1].num
	keep := s.segs[:0]
	var errs []error
	for _, seg := range s.segs {
		if (closed || seg.num != last) && seg.lastSeq <= upTo {
			if err := os.Remove(filepath.Join(s.dir, segName(seg.num))); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
				keep = append(keep, seg)
			}
			continue
		}
		keep = append(keep, seg)
	}
	s.segs = keep
	if err := fsyncDir(s.dir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("webhooks: spool %s: remove loaded segments: %w", s.dir, errors.Join(errs...))
	}
	return nil
}

// Close stops taking events, waits for the last group commit and closes
// the active segment. Events not yet loaded stay on disk for the next
// OpenSpool.
func (s *Spool) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.quit)
	<-s.stopped
	s.fmu.Lock()
	defer s.fmu.Unlock()
	err := s.f.Close()
	s.f = nil
	return err
}

// encodeRecord frames ev as a spool record.
// A record keeps an event's time as nanoseconds since 1970 plus one (0:
// none), an int64: the years 1678 to 2262. spoolableTime reports whether
// t is one of them; the receiver stores an event whose time is not with a
// null time (its raw body keeps the value), so that a replayed event never
// comes back with another time.
var minSpoolTime, maxSpoolTime = time.Unix(0, math.MinInt64+1), time.Unix(0, math.MaxInt64-1)

func spoolableTime(t time.Time) bool { return !t.Before(minSpoolTime) && !t.After(maxSpoolTime) }

func encodeRecord(ev *service.Event) []byte {
	payload := make([]byte, 0, len(ev.Raw)+len(ev.ID)+len(ev.Type)+len(ev.Subscription)+32)
	for _, b := range [][]byte{[]byte(ev.ID), []byte(ev.Type), []byte(ev.Subscription), ev.Raw} {
		payload = binary.AppendUvarint(payload, uint64(len(b)))
		payload = append(payload, b...)
	}
	var t int64
	if !ev.Time.IsZero() {
		t = ev.Time.UnixNano() + 1
	}
	payload = binary.AppendVarint(payload, t)
	payload = binary.AppendVarint(payload, ev.ReceivedAt.UnixNano())
	rec := make([]byte, spoolHeader, spoolHeader+len(payload))
	binary.BigEndian.PutUint32(rec[0:4], uint32(len(payload)))
	binary.BigEndian.PutUint32(rec[4:8], crc32.Checksum(payload, castagnoli))
	return append(rec, payload...)
}

var errBadPayload = errors.New("bad spool payload")

func decodeEvent(p []byte) (service.Event, error) {
	var fields [4][]byte
	for i := range fields {
		n, k := binary.Uvarint(p)
		if k <= 0 || n > uint64(len(p)-k) {
			return service.Event{}, errBadPayload
		}
		fields[i] = p[k : k+int(n)]
		p = p[k+int(n):]
	}
	t, k := binary.Varint(p)
	if k <= 0 {
		return service.Event{}, errBadPayload
	}
	p = p[k:]
	recv, k := binary.Varint(p)
	if k <= 0 || k != len(p) {
		return service.Event{}, errBadPayload
	}
	ev := service.Event{ID: string(fields[0]), Type: string(fields[1]), Subscription: string(fields[2]),
		Raw: append([]byte(nil), fields[3]...), ReceivedAt: time.Unix(0, recv).UTC()}
	if t != 0 {
		ev.Time = time.Unix(0, t-1).UTC()
	}
	return ev, nil
}

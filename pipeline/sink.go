package pipeline

import (
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/sepipe/sepipe/lakehouse"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/transform"
)

// objectSink takes the decoded pages of one object's concurrent page
// workers. It has one Parquet writer per core (writer k of n numbers its
// part files k, k+n, k+2n, ...): a worker encodes its page with whichever
// writer is free, so pages are encoded in parallel, not one at a time
// behind a lock. Each writer buffers at most one row group.
type objectSink struct {
	newWriter writerSet
	writers   []load.Writer
	free      chan load.Writer // the writers not in use
	// lake is the stream's Iceberg stage writer (nil without an Iceberg
	// lake): it gets every batch the Parquet writers get, one at a time.
	lake   *lakehouse.StageWriter
	lakeMu sync.Mutex
	intent *lakehouse.Intent // set by close when there is a lake

	mu           sync.Mutex // guards what follows
	rejects      []transform.Reject
	rejectedRows int64
	nulled       int64
	repaired     int64
	long         int64 // values over the limit, kept in files
	largestPage  int   // bytes of the largest page body
	hugeBytes    int64 // bytes of the page bodies of load.HugePage or more
	unknown      []string
}

// partFileRows, when set, is the rows of a part file (tests: many files
// from a small tenant, so that the early load has files to load).
var partFileRows int64

// sinkWriters is how many Parquet writers an object has: one per core, at
// most 4 (past that, the service is the limit, and memory grows with each).
func sinkWriters() int { return min(max(runtime.GOMAXPROCS(0), 1), 4) }

// writerSet makes an object sink's writers for one schema: Parquet writer
// k of n, and the Iceberg stage writer when the run has an Iceberg lake.
type writerSet struct {
	parquet func(first, step int) (load.Writer, error)
	lake    func() (*lakehouse.StageWriter, error) // nil: no Iceberg lake
	raw     *rawValues                             // where values too long for the warehouse go
	early   *earlyStream                           // told of finished files; nil: the stream loads at the commit
}

// rawValues keeps the values of one stream that were longer than
// Config.MaxValueBytes, each in a file of its own in the stream's staged
// partition (load.Lake.WriteRawValue): stored whole, but never copied
// through the decoder, the Parquet writers and DuckDB.
type rawValues struct {
	lake              load.Lake
	run, object, date string

	mu   sync.Mutex
	next int
}

// keep saves the value of each oversize reject of r from body, the page r
// was decoded from, and records the file in the reject.
func (k *rawValues) keep(r *transform.Result, body []byte) error {
	if k == nil {
		return nil
	}
	for i := range r.Rejects {
		rj := &r.Rejects[i]
		if !rj.Oversize {
			continue
		}
		k.mu.Lock()
		k.next++
		name := fmt.Sprintf("value-%06d.json", k.next)
		k.mu.Unlock()
		path, err := k.lake.WriteRawValue(k.run, k.object, k.date, name, body[rj.Start:rj.End])
		if err != nil {
			return err
		}
		rj.RawFile = path
		rj.Reason += "; kept whole in " + path
	}
	return nil
}

// drop removes what was kept (the stream is read again).
func (k *rawValues) drop() error {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	k.next = 0
	k.mu.Unlock()
	return k.lake.DropRawValues(k.run, k.object, k.date)
}

func newObjectSink(newWriter writerSet) (*objectSink, error) {
	s := &objectSink{newWriter: newWriter}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *objectSink) open() error {
	n := sinkWriters()
	s.writers = make([]load.Writer, 0, n)
	s.free = make(chan load.Writer, n)
	for k := range n {
		w, err := s.newWriter.parquet(k, n)
		if err != nil {
			s.abort()
			return err
		}
		s.writers = append(s.writers, w)
		s.free <- w
	}
	if s.newWriter.lake != nil {
		lw, err := s.newWriter.lake()
		if err != nil {
			s.abort()
			return err
		}
		s.lake = lw
	}
	return nil
}

// restart drops what was written (the client is reading the object again)
// and starts new writers. ReadObject calls it with no page in flight.
func (s *objectSink) restart() error { return s.restartWith(s.newWriter) }

// restartWith drops what was written and starts writers made by
// newWriter (a collection whose schema widened writes with the new one).
func (s *objectSink) restartWith(newWriter writerSet) error {
	s.abort()
	if err := s.newWriter.raw.drop(); err != nil {
		return err
	}
	s.mu.Lock()
	s.rejects, s.rejectedRows, s.nulled, s.repaired, s.long, s.unknown = nil, 0, 0, 0, 0, nil
	s.newWriter = newWriter
	s.mu.Unlock()
	return s.open()
}

// notePage records a page body's size (DuckDB's memory limit must hold the
// largest value the load reads).
func (s *objectSink) notePage(n int) {
	s.mu.Lock()
	s.largestPage = max(s.largestPage, n)
	if n >= load.HugePage {
		s.hugeBytes += int64(n)
		s.newWriter.early.huge()
	}
	s.mu.Unlock()
}

// add writes a decoded page; body is the page r was decoded from (its
// values too long for the warehouse are kept from it).
func (s *objectSink) add(r transform.Result, body []byte) error {
	if err := s.newWriter.raw.keep(&r, body); err != nil {
		return err
	}
	w := <-s.free
	err := w.Write(r.Record)
	s.free <- w
	if err != nil {
		return err
	}
	if s.lake != nil {
		s.lakeMu.Lock()
		err := s.lake.Write(r.Record)
		s.lakeMu.Unlock()
		if err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejects = append(s.rejects, r.Rejects...)
	s.rejectedRows += int64(r.RejectedRows)
	s.nulled += int64(r.NulledValues)
	s.repaired += int64(r.RepairedValues)
	for _, rj := range r.Rejects {
		if rj.Oversize {
			s.long++
		}
	}
	for _, u := range r.UnknownFields {
		if !slices.Contains(s.unknown, u) {
			s.unknown = append(s.unknown, u)
		}
	}
	return nil
}

// close finishes every writer and returns the part files, in name order,
// and the rows they hold. A writer that got no rows leaves no file, except
// that an object with no rows gets one empty file.
func (s *objectSink) close() (files []string, rows int64, err error) {
	for _, w := range s.writers {
		rows += w.Rows()
	}
	for i, w := range s.writers {
		if w.Rows() == 0 && (rows > 0 || i > 0) {
			w.Abort()
			continue
		}
		if err := w.Close(); err != nil {
			return nil, 0, err
		}
		files = append(files, w.Files()...)
	}
	sort.Strings(files)
	if s.lake != nil {
		if err := s.lake.Close(); err != nil {
			return nil, 0, err
		}
		in := s.lake.Intent()
		s.intent = &in
	}
	return files, rows, nil
}

// abort closes and removes whatever the writers wrote, after taking out
// of the run's transaction what the early load put in.
func (s *objectSink) abort() {
	s.newWriter.early.forget()
	for _, w := range s.writers {
		w.Abort()
	}
	s.writers = nil
	if s.lake != nil {
		_ = s.lake.Abort()
		s.lake, s.intent = nil, nil
	}
}

package engine

import (
	"context"
	"iter"
	"sync"
	"time"
)

// Stream is the output of one submitted request: its events (tokens with
// the text they complete, then a final Done event carrying the Result) and
// its Result.
//
// The engine never blocks on a slow consumer: events queue inside the
// stream without bound (at most MaxContext of them). Reading Events is
// optional; Wait works either way. A caller that stops reading before the
// end calls Close, which aborts the request and frees its pages at the
// next step boundary; breaking out of a range over All does that itself.
type Stream struct {
	id     uint64
	ctx    context.Context
	prompt []int // the prompt's tokens, as admission made them

	abort     func()        // aborts the request (set by Submit)
	closeOnce sync.Once     // Close
	closed    chan struct{} // closed by Close: delivery stops at once

	mu      sync.Mutex
	queue   []Event
	notify  chan struct{} // buffered(1): queue grew or ended
	ended   bool          // the Done event is in queue
	started bool          // Events has been called

	events chan Event
	done   chan struct{} // closed when the result is final
	result Result
	stop   func() bool // stops the ctx watcher
}

// abandonGrace is how long event delivery waits for a reader once the
// submitting context is cancelled.
const abandonGrace = 5 * time.Second

func newStream(ctx context.Context, id uint64) *Stream {
	return &Stream{id: id, ctx: ctx, notify: make(chan struct{}, 1), done: make(chan struct{}), closed: make(chan struct{})}
}

// Close abandons the stream: it aborts the request unless it has ended
// (its Result then says "abort", or keeps its own outcome when it ended
// first) and stops event delivery at once, closing the Events channel
// without waiting for a reader. Pages are released at the next step
// boundary; Wait returns once they are. Close is idempotent, safe for
// concurrent use, and returns at once.
func (s *Stream) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		select {
		case <-s.done:
		default:
			if s.abort != nil {
				s.abort()
			}
		}
	})
}

// ID is the request ID: unique for the engine's lifetime, usable with Abort.
func (s *Stream) ID() uint64 { return s.id }

// PromptTokens are the request's prompt tokens (BOS included), known from
// submission on, e.g. to decode each streamed token in its context. The
// caller must not modify them.
func (s *Stream) PromptTokens() []int { return s.prompt }

// Done is closed when the request has ended and Result is final.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Wait blocks until the request ends and returns its Result.
func (s *Stream) Wait() Result {
	<-s.done
	return s.result
}

// Result returns the final Result and true, or false while it runs.
func (s *Stream) Result() (Result, bool) {
	select {
	case <-s.done:
		return s.result, true
	default:
		return Result{}, false
	}
}

// Events returns the channel of events. The last event has Done set and
// carries the Result; the channel is closed after it. The first call starts
// delivery; later calls return the same channel. Callers of Events should
// drain it or call Close. If the submitting context is cancelled, the
// request is aborted and the channel still ends with its Done event; only
// if nobody reads it for 5 s after the cancel does delivery give up and
// close the channel (Close gives up at once).
func (s *Stream) Events() <-chan Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.started = true
		s.events = make(chan Event, 16)
		go s.pump()
	}
	return s.events
}

// All iterates over the generated tokens and their text; it ends after the
// last token. The error of a failed or aborted request is yielded last, with
// a zero Event. Breaking out of the loop (or returning from it) closes the
// stream (Close): the request is aborted and its pages are released at the
// next step boundary, so Wait after the loop returns promptly.
func (s *Stream) All() iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		complete := false
		defer func() {
			if !complete {
				s.Close()
			}
		}()
		for ev := range s.Events() {
			if ev.Done {
				if ev.Text != "" && !yield(Event{Token: -1, Text: ev.Text}, nil) {
					return
				}
				complete = true
				if ev.Result != nil && ev.Result.Err != nil {
					yield(Event{Token: -1}, ev.Result.Err)
				}
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func (s *Stream) pump() {
	defer close(s.events)
	for {
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		ended := s.ended
		s.mu.Unlock()
		for _, ev := range batch {
			select {
			case s.events <- ev:
			case <-s.closed:
				return
			case <-s.ctx.Done():
				// The submitter's context is gone and the request is being
				// aborted. A consumer that still drains the channel gets
				// every event, Done included; one that walked away is given
				// up on after abandonGrace without a read, so this goroutine
				// does not outlive it for long.
				t := time.NewTimer(abandonGrace)
				select {
				case s.events <- ev:
					t.Stop()
				case <-s.closed:
					t.Stop()
					return
				case <-t.C:
					return
				}
			}
		}
		if ended { // the Done event was pushed last, so it was in batch
			return
		}
		select {
		case <-s.notify:
		case <-s.closed:
			return
		}
	}
}

// push queues an event (scheduler side).
func (s *Stream) push(ev Event) {
	s.mu.Lock()
	s.queue = append(s.queue, ev)
	if ev.Done {
		s.ended = true
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// finish records the result, queues the Done event and releases Wait.
func (s *Stream) finish(r Result, tail string) {
	if s.stop != nil {
		s.stop()
	}
	s.result = r
	rc := r
	// Result must report done by the time a reader sees the Done event:
	// callers (the C API among them) ask for the Result right after it.
	close(s.done)
	s.push(Event{Token: -1, Text: tail, Done: true, Result: &rc})
}

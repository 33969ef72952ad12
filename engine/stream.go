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
// optional; Wait works either way.
type Stream struct {
	id     uint64
	ctx    context.Context
	prompt []int // the prompt's tokens, as admission made them

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
	return &Stream{id: id, ctx: ctx, notify: make(chan struct{}, 1), done: make(chan struct{})}
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
// drain it. If the submitting context is cancelled, the request is aborted
// and the channel still ends with its Done event; only if nobody reads it
// for 5 s after the cancel does delivery give up and close the channel.
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
// a zero Event. Breaking out of the loop does not abort the request.
func (s *Stream) All() iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for ev := range s.Events() {
			if ev.Done {
				if ev.Text != "" && !yield(Event{Token: -1, Text: ev.Text}, nil) {
					return
				}
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
				case <-t.C:
					return
				}
			}
		}
		if ended { // the Done event was pushed last, so it was in batch
			return
		}
		<-s.notify
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

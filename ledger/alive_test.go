package ledger

import (
	"context"
	"testing"
	"time"
)

// stuck is a command that decides only when released: a commit loop
// stuck in a write.
type stuck struct{ entered, release chan struct{} }

func (c stuck) Decide(*View) ([]Event, error) {
	close(c.entered)
	<-c.release
	return []Event{motion(1)}, nil
}

func answered(c <-chan struct{}, within time.Duration) bool {
	select {
	case <-c:
		return true
	case <-time.After(within):
		return false
	}
}

func TestAliveAnswersBetweenCommitsOnly(t *testing.T) {
	s := openTest(t, tempPath(t), func(o *Options) { o.GroupCommit = time.Hour })

	if !answered(s.Alive(), time.Minute) {
		t.Fatal("an idle commit loop did not answer")
	}

	// A grouped append held for company: the loop waits, and answers.
	q, err := s.QueueGrouped(t.Context(), time.Time{}, motion(1))
	if err != nil {
		t.Fatal(err)
	}
	for s.held.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	if !answered(s.Alive(), time.Minute) {
		t.Fatal("a commit loop holding a group did not answer")
	}
	s.Hurry()
	if _, err := q.Wait(); err != nil {
		t.Fatal(err)
	}

	// Stuck in a commit: no answer until it is released, then one.
	c := stuck{make(chan struct{}), make(chan struct{})}
	done := make(chan error, 1)
	go func() { _, err := s.Execute(context.Background(), c); done <- err }()
	<-c.entered
	p := s.Alive()
	if answered(p, 200*time.Millisecond) {
		t.Fatal("a commit loop stuck in a command answered")
	}
	// More questions than the loop keeps: the last ones are never answered.
	var extra []<-chan struct{}
	for range 10 {
		extra = append(extra, s.Alive())
	}
	close(c.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !answered(p, time.Minute) {
		t.Fatal("the loop, released, did not answer the question it was asked while stuck")
	}
	if answered(extra[9], 100*time.Millisecond) {
		t.Error("a question beyond the 8 kept was answered")
	}

	// A closed store answers at once.
	s.Close()
	if !answered(s.Alive(), time.Second) {
		t.Error("a closed store did not answer")
	}
}

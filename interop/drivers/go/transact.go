package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

func localStateName(s primitive.LocalTransactionState) string {
	switch s {
	case primitive.CommitMessageState:
		return "COMMIT_MESSAGE"
	case primitive.RollbackMessageState:
		return "ROLLBACK_MESSAGE"
	}
	return "UNKNOW"
}

// txListener answers the local transaction per --answer and the broker's checks with the
// second half of unknown-commit / unknown-rollback.
type txListener struct {
	o       *options
	mu      sync.Mutex
	pending map[string]bool // msgIds (UNIQ_KEY) still waiting for their check
	checked map[string]bool // msgIds the broker already checked
	allSent bool
	done    chan struct{}
	once    sync.Once
}

func (l *txListener) local() primitive.LocalTransactionState {
	switch l.o.answer {
	case "commit":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnknowState
}

func (l *txListener) checkAnswer() primitive.LocalTransactionState {
	switch l.o.answer {
	case "unknown-commit", "commit":
		return primitive.CommitMessageState
	}
	return primitive.RollbackMessageState
}

func (l *txListener) ExecuteLocalTransaction(*primitive.Message) primitive.LocalTransactionState {
	return l.local()
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	ans := l.checkAnswer()
	tid := m.GetProperty(primitive.PropertyTransactionID)
	if tid == "" {
		tid = m.TransactionId
	}
	e := obj{{"event", "checked"}, {"client", clientName}}
	e = e.addStr("transactionId", tid)
	e = e.addStr("msgId", m.MsgId)
	// The protocol's answer words, as the Java driver prints them.
	answer := "rollback"
	if ans == primitive.CommitMessageState {
		answer = "commit"
	}
	e = e.add("answer", answer)
	emit(e)
	atomic.AddInt64(&nChecked, 1)
	l.mu.Lock()
	delete(l.pending, m.MsgId)
	l.checked[m.MsgId] = true
	l.maybeDone()
	l.mu.Unlock()
	return ans
}

// maybeDone is called with l.mu held.
func (l *txListener) maybeDone() {
	if l.allSent && len(l.pending) == 0 {
		l.once.Do(func() { close(l.done) })
	}
}

func runTransact(o *options) {
	if o.mode != "sync" {
		unsupported("transactions are sent one by one (--mode sync)")
	}
	l := &txListener{o: o, pending: map[string]bool{}, checked: map[string]bool{}, done: make(chan struct{})}
	p, err := rocketmq.NewTransactionProducer(l, o.producerOptions()...)
	if err != nil {
		fail("client", "new transaction producer: "+err.Error(), 1)
	}
	if err := p.Start(); err != nil {
		fail("client", "start producer: "+err.Error(), 1)
	}
	emit(obj{{"event", "ready"}, {"client", clientName}})
	waitChecks := l.local() == primitive.UnknowState
	ctx := context.Background()
	for i := o.start; i < o.start+o.count; i++ {
		m := o.message(i)
		res, err := p.SendMessageInTransaction(ctx, m)
		if err != nil {
			emit(sendError(i, err))
			shutdownBounded(p.Shutdown)
			quit(1)
		}
		e := o.sentEvent(i, m, res.SendResult)
		// the broker's response header carries no transactionId (4.9.x); the client then sets
		// Message.TransactionId from the UNIQ_KEY, as the Java client does
		tid := res.TransactionID
		if tid == "" {
			tid = m.TransactionId
		}
		e = e.addStr("transactionId", tid)
		e = e.add("localState", localStateName(res.State))
		if waitChecks && res.State == primitive.UnknowState {
			l.mu.Lock()
			if !l.checked[res.MsgID] {
				l.pending[res.MsgID] = true
			}
			l.mu.Unlock()
		}
		emit(e)
		atomic.AddInt64(&nSent, 1)
	}
	l.mu.Lock()
	l.allSent = true
	l.maybeDone()
	l.mu.Unlock()
	<-l.done
	// the client sends END_TRANSACTION for a check one-way after the listener returned
	time.Sleep(500 * time.Millisecond)
	closeOutput()
	shutdownBounded(p.Shutdown)
	final(obj{{"event", "done"}, {"sent", atomic.LoadInt64(&nSent)}, {"checked", atomic.LoadInt64(&nChecked)}}, 0)
}

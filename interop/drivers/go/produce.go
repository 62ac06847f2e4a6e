package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// queueIDSelector sends every message to the queue whose QueueId is q.
type queueIDSelector struct{ q int }

func (s queueIDSelector) Select(_ *primitive.Message, mqs []*primitive.MessageQueue, _ string) *primitive.MessageQueue {
	for _, mq := range mqs {
		if mq.QueueId == s.q {
			return mq
		}
	}
	return nil // the client then fails the send with "route info not found"
}

func sendStatus(s primitive.SendStatus) string {
	switch s {
	case primitive.SendOK:
		return "SEND_OK"
	case primitive.SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case primitive.SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case primitive.SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	case primitive.SendUnknownError:
		return "UNKNOWN_ERROR"
	}
	return "STATUS_" + strconv.Itoa(int(s))
}

func (o *options) body(i int) []byte {
	text := o.bodyPrefix + strconv.Itoa(i)
	if o.bodySize < 0 {
		return []byte(text)
	}
	if len(text) < o.bodySize {
		text += strings.Repeat("|", o.bodySize-len(text))
	}
	return []byte(text)[:o.bodySize]
}

func (o *options) message(i int) *primitive.Message {
	m := primitive.NewMessage(o.topic, o.body(i))
	if o.tag != "" {
		m.WithTag(o.tag)
	}
	m.WithKeys([]string{o.keysPrefix + strconv.Itoa(i)})
	for _, p := range o.props {
		m.WithProperty(p.k, p.v.(string))
	}
	if o.delayLevel > 0 {
		m.WithDelayTimeLevel(o.delayLevel)
	}
	return m
}

func (o *options) propMap() map[string]string {
	res := map[string]string{}
	for _, p := range o.props {
		res[p.k] = p.v.(string)
	}
	return res
}

func (o *options) producerOptions() []producer.Option {
	opts := []producer.Option{
		producer.WithNsResolver(o.resolver()),
		producer.WithGroupName(o.group),
		producer.WithInstanceName(o.instance),
		producer.WithRetry(2),
	}
	if o.queue >= 0 {
		opts = append(opts, producer.WithQueueSelector(queueIDSelector{o.queue}))
	}
	if o.accessKey != "" || o.secretKey != "" {
		opts = append(opts, producer.WithCredentials(o.credentials()))
	}
	return opts
}

// sentEvent describes message i; res may be nil (oneway).
func (o *options) sentEvent(i int, m *primitive.Message, res *primitive.SendResult) obj {
	e := obj{{"event", "sent"}, {"client", clientName}, {"topic", o.topic}}
	if res != nil {
		if res.MessageQueue != nil {
			e = e.add("queueId", res.MessageQueue.QueueId)
		}
		e = e.add("queueOffset", res.QueueOffset)
		e = e.addStr("msgId", res.MsgID)
		e = e.addStr("offsetMsgId", res.OffsetMsgID)
		e = e.add("status", sendStatus(res.Status))
	} else {
		// oneway: the client returns nothing, but it did stamp the message with its UNIQ_KEY
		e = e.addStr("msgId", m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex))
		e = e.add("status", "ONEWAY")
	}
	e = e.addStr("keys", m.GetKeys())
	e = e.addStr("tags", m.GetTags())
	e = e.add("properties", o.propMap())
	e = e.add("bodyMd5", md5hex(m.Body))
	e = e.add("bodyLen", len(m.Body))
	e = e.add("index", i)
	return e
}

func sendError(i int, err error) obj {
	return errorEvent("send", err.Error()).add("index", i)
}

func runProduce(o *options) {
	p, err := rocketmq.NewProducer(o.producerOptions()...)
	if err != nil {
		fail("client", "new producer: "+err.Error(), 1)
	}
	if err := p.Start(); err != nil {
		fail("client", "start producer: "+err.Error(), 1)
	}
	emit(obj{{"event", "ready"}, {"client", clientName}})
	ctx := context.Background()
	failed := false
	end := o.start + o.count

	switch o.mode {
	case "sync":
		for i := o.start; i < end && !failed; i++ {
			m := o.message(i)
			res, err := p.SendSync(ctx, m)
			if err != nil {
				emit(sendError(i, err))
				failed = true
				break
			}
			emit(o.sentEvent(i, m, res))
			atomic.AddInt64(&nSent, 1)
		}

	case "oneway":
		for i := o.start; i < end && !failed; i++ {
			m := o.message(i)
			if err := p.SendOneWay(ctx, m); err != nil {
				emit(sendError(i, err))
				failed = true
				break
			}
			emit(o.sentEvent(i, m, nil))
			atomic.AddInt64(&nSent, 1)
		}

	case "async":
		var wg sync.WaitGroup
		var nFailed int64
		inflight := make(chan struct{}, 256) // the client has no back-pressure of its own
		for i := o.start; i < end; i++ {
			if atomic.LoadInt64(&nFailed) > 0 {
				break
			}
			i, m := i, o.message(i)
			var once sync.Once // 2.1.2 may call the callback twice on a failed request
			inflight <- struct{}{}
			wg.Add(1)
			err := p.SendAsync(ctx, func(_ context.Context, res *primitive.SendResult, err error) {
				once.Do(func() {
					defer func() { <-inflight; wg.Done() }()
					if err != nil || res == nil {
						if err == nil {
							err = errString("no send result")
						}
						atomic.AddInt64(&nFailed, 1)
						emit(sendError(i, err))
						return
					}
					emit(o.sentEvent(i, m, res))
					atomic.AddInt64(&nSent, 1)
				})
			}, m)
			if err != nil {
				<-inflight
				wg.Done()
				atomic.AddInt64(&nFailed, 1)
				emit(sendError(i, err))
				break
			}
		}
		wg.Wait()
		failed = atomic.LoadInt64(&nFailed) > 0

	case "batch":
		for b := o.start; b < end && !failed; b += o.batchSize {
			n := o.batchSize
			if b+n > end {
				n = end - b
			}
			msgs := make([]*primitive.Message, n)
			for j := range msgs {
				msgs[j] = o.message(b + j)
			}
			res, err := p.SendSync(ctx, msgs...)
			if err != nil {
				emit(sendError(b, err).add("batch", n))
				failed = true
				break
			}
			// One SendResult for the whole batch: queueOffset is the first message's, the broker's
			// offsetMsgId is comma-joined (one per message), and MsgID is the batch's UNIQ_KEY,
			// which 2.1.2 never sets (it does not stamp batched messages), so it is empty.
			offIDs := strings.Split(res.OffsetMsgID, ",")
			msgIDs := strings.Split(res.MsgID, ",")
			for j, m := range msgs {
				r := *res
				r.QueueOffset = res.QueueOffset + int64(j)
				r.OffsetMsgID = ""
				if len(offIDs) == n {
					r.OffsetMsgID = offIDs[j]
				}
				r.MsgID = ""
				if len(msgIDs) == n {
					r.MsgID = msgIDs[j]
				}
				emit(o.sentEvent(b+j, m, &r))
				atomic.AddInt64(&nSent, 1)
			}
		}
	}

	if o.mode == "oneway" && !failed {
		// 2.1.2 sends "oneway" requests without the oneway flag, so the broker answers each;
		// closing the socket with answers unread resets it and the broker drops requests it
		// had not read yet. Give it time to read them all before shutting down.
		drain := time.Second + time.Duration(atomic.LoadInt64(&nSent))*100*time.Microsecond
		time.Sleep(drain)
	}
	shutdownBounded(p.Shutdown)
	if failed {
		quit(1) // the failed send's error event was the last line
	}
	final(obj{{"event", "done"}, {"sent", atomic.LoadInt64(&nSent)}}, 0)
}

type errString string

func (e errString) Error() string { return string(e) }

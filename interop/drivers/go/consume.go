package main

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// receiver counts "ok" deliveries and the reconsume-later budget for one consume run.
type receiver struct {
	o         *options
	laterLeft int64
	reached   chan struct{}
	once      sync.Once
}

func newReceiver(o *options) *receiver {
	r := &receiver{o: o, laterLeft: int64(o.reconsumeLater), reached: make(chan struct{})}
	if o.expect == 0 {
		r.once.Do(func() { close(r.reached) })
	}
	return r
}

// takeLater reports whether this delivery is one of the first K to answer "later".
func (r *receiver) takeLater() bool {
	return atomic.AddInt64(&r.laterLeft, -1) >= 0
}

func receivedEvent(m *primitive.MessageExt, action string) obj {
	topic := m.Topic
	if strings.HasPrefix(topic, "%RETRY%") {
		if rt := m.GetProperty(primitive.PropertyRetryTopic); rt != "" {
			topic = rt
		}
	}
	e := obj{{"event", "received"}, {"client", clientName}, {"topic", topic}}
	if m.Queue != nil {
		e = e.add("queueId", m.Queue.QueueId)
	}
	e = e.add("queueOffset", m.QueueOffset)
	e = e.addStr("msgId", m.MsgId)
	e = e.addStr("offsetMsgId", m.OffsetMsgId)
	e = e.addStr("keys", m.GetKeys())
	e = e.addStr("tags", m.GetTags())
	e = e.add("properties", userProps(m.GetProperties()))
	e = e.add("bodyMd5", md5hex(m.Body))
	e = e.add("bodyLen", len(m.Body))
	e = e.add("reconsumeTimes", m.ReconsumeTimes)
	e = e.add("storeTimestamp", m.StoreTimestamp)
	e = e.add("bornTimestamp", m.BornTimestamp)
	e = e.add("action", action)
	return e
}

// deliver prints a received event. When the run is already winding down it never returns, so
// the client neither acknowledges nor retries the message (it stays for the next consumer).
func (r *receiver) deliver(m *primitive.MessageExt, action string) {
	printed := emitWith(func() obj {
		if action == "ok" {
			if atomic.AddInt64(&nReceived, 1) >= int64(r.o.expect) {
				r.once.Do(func() { close(r.reached) })
			}
		}
		return receivedEvent(m, action)
	})
	if !printed {
		select {}
	}
}

// finish waits for --expect, lingers, shuts the client down and prints done.
func (r *receiver) finish(shutdown func() error) {
	<-r.reached
	if r.o.linger > 0 {
		time.Sleep(time.Duration(r.o.linger * float64(time.Second)))
	}
	closeOutput()
	shutdownBounded(shutdown)
	final(obj{{"event", "done"}, {"received", atomic.LoadInt64(&nReceived)}}, 0)
}

func (o *options) selector() consumer.MessageSelector {
	if o.sqlSet {
		return consumer.MessageSelector{Type: consumer.SQL92, Expression: o.sql}
	}
	return consumer.MessageSelector{Type: consumer.TAG, Expression: o.tags}
}

func (o *options) consumerOptions() []consumer.Option {
	model := consumer.Clustering
	if o.model == "broadcasting" {
		model = consumer.BroadCasting
	}
	from := consumer.ConsumeFromFirstOffset
	if o.from == "last" {
		from = consumer.ConsumeFromLastOffset
	}
	opts := []consumer.Option{
		consumer.WithNsResolver(o.resolver()),
		consumer.WithGroupName(o.group),
		consumer.WithInstance(o.instance),
		consumer.WithConsumerModel(model),
		consumer.WithConsumeFromWhere(from),
	}
	if o.accessKey != "" || o.secretKey != "" {
		opts = append(opts, consumer.WithCredentials(o.credentials()))
	}
	return opts
}

// credentials: the ACL keys every request is signed with.
func (o *options) credentials() primitive.Credentials {
	return primitive.Credentials{AccessKey: o.accessKey, SecretKey: o.secretKey}
}

// routeMissing: Start() of both consumers fails (and shuts the consumer down) when the topic has
// no route yet; the driver then builds a fresh consumer and tries again until the deadline.
func routeMissing(err error) bool {
	return err != nil && strings.Contains(err.Error(), "route info not found")
}

func startRetrying(start func() error) {
	for {
		err := start()
		if err == nil {
			return
		}
		if !routeMissing(err) || time.Until(deadline) < time.Second {
			fail("client", "start consumer: "+err.Error(), 1)
		}
		time.Sleep(time.Second)
	}
}

func runConsume(o *options) {
	switch o.mode {
	case "lite-pull":
		unsupported("rocketmq-client-go 2.1.2 has no lite pull consumer with assign/seek/commitSync")
	case "pull":
		runPull(o)
	default:
		runPush(o)
	}
}

func runPush(o *options) {
	r := newReceiver(o)
	orderly := o.mode == "orderly"
	opts := append(o.consumerOptions(),
		consumer.WithConsumerOrder(orderly),
		consumer.WithConsumeMessageBatchMaxSize(1))
	listener := func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		later := r.takeLater()
		action := "ok"
		if later {
			action = "later"
		}
		for _, m := range msgs {
			r.deliver(m, action)
		}
		if !later {
			return consumer.ConsumeSuccess, nil
		}
		if orderly {
			return consumer.SuspendCurrentQueueAMoment, nil
		}
		return consumer.ConsumeRetryLater, nil
	}
	var c rocketmq.PushConsumer
	startRetrying(func() error {
		var err error
		c, err = rocketmq.NewPushConsumer(opts...)
		if err != nil {
			fail("client", "new push consumer: "+err.Error(), 1)
		}
		if err := c.Subscribe(o.topic, o.selector(), listener); err != nil {
			fail("client", "subscribe: "+err.Error(), 1)
		}
		return c.Start()
	})
	emit(obj{{"event", "ready"}, {"client", clientName}})
	r.finish(c.Shutdown)
}

// runPull reads every queue of the topic with PullConsumer.PullFrom, keeping the offsets itself
// (the way the client's pull_from example does); queues come from admin.FetchPublishMessageQueues.
func runPull(o *options) {
	if o.reconsumeLater > 0 {
		unsupported("--reconsume-later with --mode pull: 2.1.2's PullFrom has no send-back")
	}
	r := newReceiver(o)
	var pc rocketmq.PullConsumer
	startRetrying(func() error {
		var err error
		pc, err = rocketmq.NewPullConsumer(o.consumerOptions()...)
		if err != nil {
			fail("client", "new pull consumer: "+err.Error(), 1)
		}
		if err := pc.Subscribe(o.topic, o.selector()); err != nil {
			fail("client", "subscribe: "+err.Error(), 1)
		}
		return pc.Start()
	})
	adm, err := admin.NewAdmin(admin.WithResolver(o.resolver()))
	if err != nil {
		fail("client", "new admin: "+err.Error(), 1)
	}
	ctx := context.Background()
	mqs, err := adm.FetchPublishMessageQueues(ctx, o.topic)
	adm.Close()
	if err != nil {
		fail("client", "fetch queues: "+err.Error(), 1)
	}
	if len(mqs) == 0 {
		fail("client", "fetch queues: none", 1)
	}
	starts := make([]int64, len(mqs))
	for i, mq := range mqs {
		if o.from == "last" {
			starts[i] = maxOffsetOf(ctx, pc, mq)
		}
	}
	emit(obj{{"event", "ready"}, {"client", clientName}, {"queues", len(mqs)}})
	for i, mq := range mqs {
		go pullQueue(ctx, pc, r, mq, starts[i])
	}
	r.finish(pc.Shutdown)
}

// maxOffsetOf: 2.1.2 has no public maxOffset(); a pull far past the end comes back OFFSET_MOVED
// (PullOffsetIllegal) with nextBeginOffset = the queue's max offset, and every pull result
// carries maxOffset.
func maxOffsetOf(ctx context.Context, pc rocketmq.PullConsumer, mq *primitive.MessageQueue) int64 {
	for {
		res, err := pc.PullFrom(ctx, mq, 1<<62, 1)
		if err == nil {
			if res.Status == primitive.PullOffsetIllegal {
				return res.NextBeginOffset
			}
			return res.MaxOffset
		}
		if time.Until(deadline) < time.Second {
			fail("client", "max offset: "+err.Error(), 1)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func pullQueue(ctx context.Context, pc rocketmq.PullConsumer, r *receiver, mq *primitive.MessageQueue, offset int64) {
	for {
		res, err := pc.PullFrom(ctx, mq, offset, 32)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		switch res.Status {
		case primitive.PullFound:
			for _, m := range res.GetMessageExts() {
				r.deliver(m, "ok")
			}
			offset = res.NextBeginOffset
		case primitive.PullNoNewMsg, primitive.PullNoMsgMatched, primitive.PullOffsetIllegal:
			// the broker already held a PullNoNewMsg for its long-poll time
			offset = res.NextBeginOffset
		default:
			time.Sleep(200 * time.Millisecond)
		}
	}
}

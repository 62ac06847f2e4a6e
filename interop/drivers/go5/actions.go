package main

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ---------------------------------------------------------------------------------------------
// helpers

func config(o *options, group string) *rmq.Config {
	c := &rmq.Config{Endpoint: o.endpoints, NameSpace: o.namespace, ConsumerGroup: group}
	if o.accessKey != "" {
		// Without credentials the client signs nothing (it sends no authorization).
		c.Credentials = &credentials.SessionCredentials{AccessKey: o.accessKey, AccessSecret: o.secretKey}
	}
	return c
}

// clientFunc makes the client with `--request-timeout` as its per-call timeout (the producer and
// the simple consumer take one; the push consumer keeps the client's 3 s).
func clientFunc(o *options) rmq.NewClientFunc {
	timeout := time.Duration(o.requestTimeout) * time.Second
	return func(c *rmq.Config, opts ...rmq.ClientOption) (rmq.Client, error) {
		return rmq.NewClient(c, append(opts, rmq.WithQueryRouteTimeout(timeout))...)
	}
}

var grpcCodeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
	codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
	codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
	codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
	codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
	codes.Unauthenticated: "UNAUTHENTICATED",
}

func codeName(code int32) string {
	if name, ok := v2.Code_name[code]; ok {
		return name
	}
	return fmt.Sprint(code)
}

// describeError gives `message` plus what the error carries: the v2 status code, or the gRPC
// status.
func describeError(err error) event {
	e := event{"message": fmt.Sprintf("%T: %v", err, err)}
	var rpc *rmq.ErrRpcStatus
	if errors.As(err, &rpc) {
		e["code"] = rpc.Code
		e["codeName"] = codeName(rpc.Code)
		return e
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		name := grpcCodeNames[s.Code()]
		e["grpcStatus"] = name
		e["message"] = fmt.Sprintf("%s: %s", name, s.Message())
	} else if errors.Is(err, context.DeadlineExceeded) {
		e["grpcStatus"] = "DEADLINE_EXCEEDED"
	}
	return e
}

func makeBody(o *options, i int) []byte {
	text := []byte(fmt.Sprintf("%s%d", o.bodyPrefix, i))
	if o.bodySize < 0 {
		return text
	}
	body := make([]byte, o.bodySize)
	for n := range body {
		if n < len(text) {
			body[n] = text[n]
		} else {
			body[n] = '|'
		}
	}
	return body
}

func md5hex(body []byte) string {
	sum := md5.Sum(body)
	return hex.EncodeToString(sum[:])
}

func joinKeys(keys []string) (string, bool) {
	if len(keys) == 0 {
		return "", false
	}
	sorted := append([]string(nil), keys...)
	sort.Strings(sorted)
	return strings.Join(sorted, " "), true
}

func copyProps(props map[string]string) map[string]string {
	out := make(map[string]string, len(props))
	for k, v := range props {
		out[k] = v
	}
	return out
}

// ---------------------------------------------------------------------------------------------
// produce

type outgoing struct {
	msg        *rmq.Message
	body       []byte
	deliveryMs int64 // 0: none
}

func messageFor(o *options, i int) outgoing {
	body := makeBody(o, i)
	msg := &rmq.Message{Topic: o.topic, Body: body}
	if o.hasTag {
		msg.SetTag(o.tag)
	}
	msg.SetKeys(fmt.Sprintf("%s%d", o.keysPrefix, i))
	for _, k := range o.propOrder {
		msg.AddProperty(k, o.props[k])
	}
	if o.messageGroup != "" {
		msg.SetMessageGroup(o.messageGroup)
	}
	var due int64
	if o.deliverAfterMs != 0 {
		// Whole milliseconds, as the server keeps it (the client sends a Timestamp).
		due = time.Now().UnixMilli() + o.deliverAfterMs
		msg.SetDelayTimestamp(time.UnixMilli(due))
	}
	return outgoing{msg: msg, body: body, deliveryMs: due}
}

func sentEvent(o *options, i int, m outgoing, receipt *rmq.SendReceipt, extra event) event {
	e := event{
		"event":       "sent",
		"client":      clientName,
		"topic":       o.topic,
		"queueOffset": receipt.Offset,
		"msgId":       receipt.MessageID,
		"status":      "SEND_OK",
		"properties":  copyProps(o.props),
		"bodyMd5":     md5hex(m.body),
		"bodyLen":     len(m.body),
		"index":       i,
	}
	if receipt.TransactionId != "" {
		e["transactionId"] = receipt.TransactionId
	}
	if receipt.RecallHandle != "" {
		e["recallHandle"] = receipt.RecallHandle
	}
	if keys, ok := joinKeys(m.msg.GetKeys()); ok {
		e["keys"] = keys
	}
	if m.msg.Tag != nil {
		e["tags"] = *m.msg.Tag
	}
	if g := m.msg.GetMessageGroup(); g != nil {
		e["messageGroup"] = *g
	}
	if m.deliveryMs != 0 {
		e["deliveryTimestamp"] = m.deliveryMs
	}
	for k, v := range extra {
		e[k] = v
	}
	return e
}

func startProducer(o *options, opts ...rmq.ProducerOption) rmq.Producer {
	opts = append(opts, rmq.WithTopics(o.topic), rmq.WithClientFunc(clientFunc(o)))
	producer, err := rmq.NewProducer(config(o, ""), opts...)
	if err != nil {
		failErr("client", err, 1, nil)
	}
	// Start queries the topic's route and waits for the server's settings over Telemetry.
	if err := producer.Start(); err != nil {
		failErr("client", err, 1, nil)
	}
	emit(event{"event": "ready", "client": clientName}, false)
	return producer
}

func sendError(i int, err error) event {
	e := describeError(err)
	e["event"], e["error"], e["index"] = "error", "send", i
	return e
}

func requestContext(o *options) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Duration(o.requestTimeout)*time.Second*4)
}

func produce(o *options) {
	if o.mode != "sync" && o.mode != "async" {
		// The 5.x client sends one message per call and has no oneway or batch send.
		fail("unsupported", fmt.Sprintf("produce --mode %s (the 5.x client: sync, async)", o.mode), 2, nil)
	}
	producer := startProducer(o)
	sent, failed := 0, 0
	if o.mode == "sync" {
		for i := o.start; i < o.start+o.count; i++ {
			m := messageFor(o, i)
			ctx, cancel := requestContext(o)
			receipts, err := producer.Send(ctx, m.msg)
			cancel()
			if err == nil && len(receipts) == 0 {
				err = errors.New("the send returned no receipt")
			}
			if err != nil {
				failed++
				if !o.keepGoing {
					failErr("send", err, 1, event{"index": i})
				}
				emit(sendError(i, err), false)
				continue
			}
			emit(sentEvent(o, i, m, receipts[0], nil), false)
			sent++
		}
	} else {
		type result struct {
			receipts []*rmq.SendReceipt
			err      error
		}
		results := make([]result, o.count)
		messages := make([]outgoing, o.count)
		var wg sync.WaitGroup
		for n := 0; n < o.count; n++ {
			messages[n] = messageFor(o, o.start+n)
			wg.Add(1)
			slot := n
			producer.SendAsync(context.Background(), messages[n].msg,
				func(_ context.Context, receipts []*rmq.SendReceipt, err error) {
					results[slot] = result{receipts, err}
					wg.Done()
				})
		}
		wg.Wait()
		for n, r := range results {
			err := r.err
			if err == nil && len(r.receipts) == 0 {
				err = errors.New("the send returned no receipt")
			}
			if err != nil {
				failed++
				emit(sendError(o.start+n, err), false)
				continue
			}
			emit(sentEvent(o, o.start+n, messages[n], r.receipts[0], nil), false)
			sent++
		}
	}
	if failed > 0 {
		fail("send", fmt.Sprintf("%d of %d sends failed", failed, o.count), 1, nil)
	}
	finish(event{"sent": sent}, 10*time.Second, producer)
}

// ---------------------------------------------------------------------------------------------
// transact

// transact sends each message as a half message of its own transaction, then commits or rolls
// it back at once (`commit`, `rollback`), or leaves it open for the server's check
// (RecoverOrphanedTransactionCommand over Telemetry), which the checker answers
// (`unknown-commit`, `unknown-rollback`). `unknown` leaves them all open and ends at once.
func transact(o *options) {
	if o.mode != "sync" {
		fail("unsupported", "transactions are sent one by one (--mode sync)", 2, nil)
	}
	if o.messageGroup != "" || o.deliverAfterMs != 0 {
		fail("usage", "a transaction message has no message group nor delivery time", 2, nil)
	}
	answer, answerName := rmq.ROLLBACK, "rollback"
	if o.answer == "unknown-commit" {
		answer, answerName = rmq.COMMIT, "commit"
	}
	var lock sync.Mutex
	transactionIDs := map[string]string{} // msgId -> transactionId, from the send receipts
	checked := map[string]bool{}
	checker := &rmq.TransactionChecker{
		Check: func(msg *rmq.MessageView) rmq.TransactionResolution {
			lock.Lock()
			checked[msg.GetMessageId()] = true
			transactionID := transactionIDs[msg.GetMessageId()]
			lock.Unlock()
			e := event{
				"event": "checked", "client": clientName, "msgId": msg.GetMessageId(),
				"answer": answerName,
			}
			if transactionID != "" {
				e["transactionId"] = transactionID
			}
			emit(e, false)
			return answer
		},
	}
	producer := startProducer(o, rmq.WithTransactionChecker(checker))
	var sentIDs []string
	for i := o.start; i < o.start+o.count; i++ {
		m := messageFor(o, i)
		transaction := producer.BeginTransaction()
		ctx, cancel := requestContext(o)
		receipts, err := producer.SendWithTransaction(ctx, m.msg, transaction)
		cancel()
		if err == nil && len(receipts) == 0 {
			err = errors.New("the send returned no receipt")
		}
		if err != nil {
			failErr("send", err, 1, event{"index": i})
		}
		receipt := receipts[0]
		lock.Lock()
		transactionIDs[receipt.MessageID] = receipt.TransactionId
		lock.Unlock()
		sentIDs = append(sentIDs, receipt.MessageID)
		state := "UNKNOW"
		switch o.answer {
		case "commit":
			err, state = transaction.Commit(), "COMMIT_MESSAGE"
		case "rollback":
			err, state = transaction.RollBack(), "ROLLBACK_MESSAGE"
		}
		if err != nil {
			failErr("end-transaction", err, 1, event{"index": i})
		}
		emit(sentEvent(o, i, m, receipt, event{"localState": state}), false)
	}
	if o.answer == "unknown-commit" || o.answer == "unknown-rollback" {
		// Until every message was checked and its EndTransaction(SOURCE_SERVER_CHECK) answered;
		// the watchdog ends a run whose checks never come.
		for {
			done := true
			for _, id := range sentIDs {
				if !wire.checked(id) {
					done = false
					break
				}
			}
			if done {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	lock.Lock()
	nChecked := len(checked)
	lock.Unlock()
	finish(event{"sent": o.count, "checked": nChecked}, 10*time.Second, producer)
}

// ---------------------------------------------------------------------------------------------
// consume

func filterExpression(o *options) *rmq.FilterExpression {
	if o.sql != "" {
		return rmq.NewFilterExpressionWithType(o.sql, rmq.SQL92)
	}
	tags := o.tags
	if tags == "" {
		tags = "*"
	}
	return rmq.NewFilterExpression(tags)
}

func receivedEvent(msg *rmq.MessageView, action string) event {
	body := msg.GetBody()
	e := event{
		"event":         "received",
		"client":        clientName,
		"topic":         msg.GetTopic(),
		"msgId":         msg.GetMessageId(),
		"properties":    copyProps(msg.GetProperties()),
		"bodyMd5":       md5hex(body),
		"bodyLen":       len(body),
		"receiptHandle": msg.GetReceiptHandle(),
		"action":        action,
	}
	if seen, ok := wire.message(msg.GetReceiptHandle()); ok {
		e["queueId"] = seen.queueID
		if seen.queueOffset != nil {
			e["queueOffset"] = *seen.queueOffset
		}
		if seen.storeTimestamp != nil {
			e["storeTimestamp"] = *seen.storeTimestamp
		}
		if seen.storeHost != "" {
			e["storeHost"] = seen.storeHost
		}
		if seen.messageType != "" && seen.messageType != "MESSAGE_TYPE_UNSPECIFIED" {
			e["messageType"] = seen.messageType
		}
	}
	if keys, ok := joinKeys(msg.GetKeys()); ok {
		e["keys"] = keys
	}
	if tag := msg.GetTag(); tag != nil {
		e["tags"] = *tag
	}
	if g := msg.GetMessageGroup(); g != nil {
		e["messageGroup"] = *g
	}
	if attempt := msg.GetDeliveryAttempt(); attempt != 0 {
		e["deliveryAttempt"] = attempt
		e["reconsumeTimes"] = attempt - 1
	}
	if t := msg.GetBornTimestamp(); t != nil {
		e["bornTimestamp"] = t.UnixMilli()
	}
	if t := msg.GetDeliveryTimestamp(); t != nil {
		e["deliveryTimestamp"] = t.UnixMilli()
	}
	if h := msg.GetBornHost(); h != nil && *h != "" {
		e["bornHost"] = *h
	}
	return e
}

// goal counts `received` events that count for `--expect`; then `--linger` seconds more.
type goal struct {
	mu        sync.Mutex
	expect    int
	linger    time.Duration
	count     int
	reachedAt time.Time
}

func newGoal(o *options) *goal {
	g := &goal{expect: o.expect, linger: time.Duration(o.linger * float64(time.Second))}
	if o.expect == 0 {
		g.reachedAt = time.Now()
	}
	return g
}

func (g *goal) add() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.count++
	if g.reachedAt.IsZero() && g.count >= g.expect {
		g.reachedAt = time.Now()
	}
}

func (g *goal) over() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.reachedAt.IsZero() && time.Since(g.reachedAt) >= g.linger
}

func (g *goal) total() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.count
}

func simpleConsume(o *options) {
	consumer, err := rmq.NewSimpleConsumer(config(o, o.group),
		rmq.WithSimpleAwaitDuration(time.Duration(o.awaitDuration)*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{o.topic: filterExpression(o)}),
		rmq.WithClientFuncForSimpleConsumer(clientFunc(o)),
	)
	if err != nil {
		failErr("client", err, 1, nil)
	}
	if err := consumer.Start(); err != nil {
		failErr("client", err, 1, nil)
	}
	emit(event{"event": "ready", "client": clientName}, false)
	g := newGoal(o)
	invisible := time.Duration(o.invisibleDuration) * time.Second
	for !g.over() {
		started := time.Now()
		messages, err := consumer.Receive(context.Background(), int32(o.batchSize), invisible)
		polled := event{"event": "polled", "client": clientName}
		if err != nil {
			// The client hands MESSAGE_NOT_FOUND (an empty long poll) back as an error.
			rpc, ok := rmq.AsErrRpcStatus(err)
			if !ok || rpc.Code != int32(v2.Code_MESSAGE_NOT_FOUND) {
				failErr("receive", err, 1, nil)
			}
			messages = nil
			polled["codeName"] = codeName(rpc.Code)
		}
		polled["count"] = len(messages)
		polled["seconds"] = float64(time.Since(started).Milliseconds()) / 1000
		emit(polled, false)
		for _, msg := range messages {
			if o.noAck {
				emit(receivedEvent(msg, "noack"), false)
				g.add()
				continue
			}
			ctx, cancel := requestContext(o)
			err := consumer.Ack(ctx, msg)
			cancel()
			if err == nil {
				// The client drops an ack's status: read it from the wire.
				if st, ok := wire.ackStatus(msg.GetReceiptHandle()); ok && st.GetCode() != v2.Code_OK {
					err = &rmq.ErrRpcStatus{Code: int32(st.GetCode()), Message: st.GetMessage()}
				}
			}
			if err != nil {
				e := receivedEvent(msg, "ack-failed")
				for k, v := range describeError(err) {
					e[k] = v
				}
				emit(e, false)
				continue
			}
			emit(receivedEvent(msg, "ok"), false)
			g.add()
		}
	}
	finish(event{"received": g.total()}, 10*time.Second, consumer)
}

func pushConsume(o *options) {
	g := newGoal(o)
	var laterLock sync.Mutex
	later := o.reconsumeLater
	var okLock sync.Mutex
	var okHandles []string
	listener := &rmq.FuncMessageListener{
		Consume: func(msg *rmq.MessageView) rmq.ConsumerResult {
			laterLock.Lock()
			answerLater := later > 0
			if answerLater {
				later--
			}
			laterLock.Unlock()
			if answerLater {
				emit(receivedEvent(msg, "later"), false)
				return rmq.FAILURE
			}
			okLock.Lock()
			okHandles = append(okHandles, msg.GetReceiptHandle())
			okLock.Unlock()
			emit(receivedEvent(msg, "ok"), false)
			g.add()
			return rmq.SUCCESS
		},
	}
	consumer, err := rmq.NewPushConsumer(config(o, o.group),
		rmq.WithPushSubscriptionExpressions(map[string]*rmq.FilterExpression{o.topic: filterExpression(o)}),
		rmq.WithPushMessageListener(listener),
		rmq.WithPushConsumptionThreadCount(int32(o.threads)),
	)
	if err != nil {
		failErr("client", err, 1, nil)
	}
	// Start waits for the server's settings over Telemetry (with no limit: the watchdog's).
	if err := consumer.Start(); err != nil {
		failErr("client", err, 1, nil)
	}
	emit(event{"event": "ready", "client": clientName}, false)
	for !g.over() {
		time.Sleep(50 * time.Millisecond)
	}
	// The client acks after the listener returned: wait (a little) until the server answered
	// each ack, so every message reported received was acked before `done`.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		okLock.Lock()
		handles := append([]string(nil), okHandles...)
		okLock.Unlock()
		acked := 0
		for _, h := range handles {
			if _, ok := wire.ackStatus(h); ok {
				acked++
			}
		}
		if acked == len(handles) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Its GracefulStop first waits for the long poll in flight (the server's 20 s): bounded.
	finish(event{"received": g.total()}, time.Second, consumer)
}

// ---------------------------------------------------------------------------------------------
// route

// route starts a producer for the topic (its startup queries the route and fails on an error
// status) and reports the QueryRoute answer it got, read from the wire.
func route(o *options) {
	producer, err := rmq.NewProducer(config(o, ""), rmq.WithTopics(o.topic), rmq.WithClientFunc(clientFunc(o)))
	if err != nil {
		failErr("client", err, 1, nil)
	}
	startErr := producer.Start()
	response := wire.route(o.topic)
	if response == nil {
		if startErr == nil {
			startErr = errors.New("no QueryRoute answer was seen")
		}
		failErr("route", startErr, 1, nil)
	}
	if startErr == nil {
		emit(event{"event": "ready", "client": clientName}, false)
	}
	st := response.GetStatus()
	code := int32(st.GetCode())
	if st.GetCode() != v2.Code_OK && st.GetCode() != v2.Code_MULTIPLE_RESULTS {
		msg := st.GetMessage()
		if msg == "" {
			msg = codeName(code)
		}
		fail("route", msg, 1, event{"code": code, "codeName": codeName(code)})
	}
	if startErr != nil {
		failErr("client", startErr, 1, nil)
	}
	queues := []event{}
	for _, q := range response.GetMessageQueues() {
		endpoints := []string{}
		for _, a := range q.GetBroker().GetEndpoints().GetAddresses() {
			endpoints = append(endpoints, fmt.Sprintf("%s:%d", a.GetHost(), a.GetPort()))
		}
		types := []string{}
		for _, t := range q.GetAcceptMessageTypes() {
			types = append(types, t.String())
		}
		queues = append(queues, event{
			"id":                 q.GetId(),
			"permission":         q.GetPermission().String(),
			"broker":             q.GetBroker().GetName(),
			"brokerId":           q.GetBroker().GetId(),
			"endpoints":          endpoints,
			"acceptMessageTypes": types,
		})
	}
	emit(event{
		"event": "route", "client": clientName, "topic": o.topic, "code": code,
		"codeName": codeName(code), "queues": queues,
	}, false)
	finish(event{"queues": len(queues)}, 10*time.Second, producer)
}

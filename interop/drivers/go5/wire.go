package main

// What the client does not keep, read from the wire beside it: gRPC interceptors on every
// connection the client opens (its NewRpcClient hook). Nothing is changed on the way.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

type wireMessage struct {
	queueID        int32
	queueOffset    *int64
	storeTimestamp *int64
	storeHost      string
	messageType    string
}

type wireTap struct {
	mu       sync.Mutex
	received map[string]wireMessage            // by receipt handle
	routes   map[string]*v2.QueryRouteResponse // by topic
	acks     map[string]*v2.Status             // by receipt handle
	checks   map[string]bool                   // msgIds ended with SOURCE_SERVER_CHECK
}

var wire = &wireTap{
	received: map[string]wireMessage{},
	routes:   map[string]*v2.QueryRouteResponse{},
	acks:     map[string]*v2.Status{},
	checks:   map[string]bool{},
}

func installWireTap() {
	original := rmq.NewRpcClient
	callLog := callLogger()
	rmq.NewRpcClient = func(target string, opts ...rmq.RpcClientOption) (rmq.RpcClient, error) {
		tap := rmq.WithDialOptions(
			grpc.WithChainUnaryInterceptor(wire.unary),
			grpc.WithChainStreamInterceptor(wire.stream),
		)
		return original(target, append(opts, rmq.WithRpcClientConnOption(tap, callLog))...)
	}
}

// callLogger keeps the client's log of each call under $HOME/logs with its other logs (it
// writes /tmp/rocketmq-logger.log, shared by every run, by default).
func callLogger() rmq.ConnOption {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = os.TempDir()
	}
	config := zap.NewProductionConfig()
	path := filepath.Join(home, "logs", "rocketmq-grpc-calls.log")
	config.OutputPaths = []string{path}
	config.ErrorOutputPaths = []string{path}
	logger, err := config.Build()
	if err != nil {
		logger = zap.NewNop()
	}
	return rmq.WithZapLogger(logger)
}

func (w *wireTap) unary(
	ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption,
) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch r := reply.(type) {
	case *v2.QueryRouteResponse:
		if q, ok := req.(*v2.QueryRouteRequest); ok {
			w.routes[q.GetTopic().GetName()] = r
		}
	case *v2.AckMessageResponse:
		for _, entry := range r.GetEntries() {
			w.acks[entry.GetReceiptHandle()] = entry.GetStatus()
		}
		if q, ok := req.(*v2.AckMessageRequest); ok && len(r.GetEntries()) == 0 {
			for _, entry := range q.GetEntries() {
				w.acks[entry.GetReceiptHandle()] = r.GetStatus()
			}
		}
	case *v2.EndTransactionResponse:
		q, ok := req.(*v2.EndTransactionRequest)
		if ok && q.GetSource() == v2.TransactionSource_SOURCE_SERVER_CHECK {
			w.checks[q.GetMessageId()] = true
		}
	}
	return nil
}

func (w *wireTap) stream(
	ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption,
) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || !strings.HasSuffix(method, "/ReceiveMessage") {
		return s, err
	}
	return &receiveStream{ClientStream: s, tap: w}, nil
}

type receiveStream struct {
	grpc.ClientStream
	tap *wireTap
}

func (s *receiveStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		return err
	}
	resp, ok := m.(*v2.ReceiveMessageResponse)
	if !ok || resp.GetMessage() == nil {
		return nil
	}
	props := resp.GetMessage().GetSystemProperties()
	seen := wireMessage{
		queueID:     props.GetQueueId(),
		queueOffset: props.QueueOffset,
		storeHost:   props.GetStoreHost(),
		messageType: props.GetMessageType().String(),
	}
	if props.StoreTimestamp != nil {
		ms := props.StoreTimestamp.AsTime().UnixMilli()
		seen.storeTimestamp = &ms
	}
	s.tap.mu.Lock()
	s.tap.received[props.GetReceiptHandle()] = seen
	s.tap.mu.Unlock()
	return nil
}

func (w *wireTap) message(receiptHandle string) (wireMessage, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m, ok := w.received[receiptHandle]
	return m, ok
}

func (w *wireTap) ackStatus(receiptHandle string) (*v2.Status, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.acks[receiptHandle]
	return s, ok
}

func (w *wireTap) route(topic string) *v2.QueryRouteResponse {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.routes[topic]
}

func (w *wireTap) checked(msgID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.checks[msgID]
}

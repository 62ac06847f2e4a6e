package main

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"os"
	"sort"
	"strings"
	"sync"
)

const clientName = "go"

// kv is one key of an output object; obj keeps the keys in the order they were added so that
// "event" comes first in every line.
type kv struct {
	k string
	v interface{}
}

type obj []kv

func (o obj) add(k string, v interface{}) obj { return append(o, kv{k, v}) }

// addStr adds k only when v is not empty (keys the client cannot know are omitted).
func (o obj) addStr(k, v string) obj {
	if v == "" {
		return o
	}
	return append(o, kv{k, v})
}

func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(e.k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

var (
	outMu        sync.Mutex
	outClosed    bool // no more ordinary events (the run is winding down)
	finalWritten bool // the last line was written; nothing follows it
)

func writeLine(o obj) {
	line, err := json.Marshal(o)
	if err != nil {
		line, _ = json.Marshal(obj{{"event", "error"}, {"error", "client"}, {"message", "json: " + err.Error()}})
	}
	line = append(line, '\n')
	os.Stdout.Write(line) // os.Stdout is unbuffered: one write per line, flushed at once
}

// emit prints one event line unless the run is already winding down.
func emit(o obj) bool {
	outMu.Lock()
	defer outMu.Unlock()
	if outClosed || finalWritten {
		return false
	}
	writeLine(o)
	return true
}

// emitWith prints the line f builds while holding the output lock, so a check-and-print
// (e.g. "still below --expect") is atomic with respect to other goroutines. f may return nil.
// It reports false when the run is winding down and nothing was printed.
func emitWith(f func() obj) bool {
	outMu.Lock()
	defer outMu.Unlock()
	if outClosed || finalWritten {
		return false
	}
	if o := f(); o != nil {
		writeLine(o)
	}
	return true
}

// closeOutput stops ordinary event lines; only final() still prints.
func closeOutput() {
	outMu.Lock()
	outClosed = true
	outMu.Unlock()
}

// final prints the last line (unless another final line won the race) and exits with code.
func final(o obj, code int) {
	outMu.Lock()
	if finalWritten {
		outMu.Unlock()
		select {} // the other final() is exiting
	}
	writeLine(o)
	finalWritten = true
	outMu.Unlock()
	os.Exit(code)
}

// quit exits without another line (the last one printed says why).
func quit(code int) {
	outMu.Lock()
	finalWritten = true
	outMu.Unlock()
	os.Exit(code)
}

func errorEvent(kind, msg string) obj {
	return obj{{"event", "error"}, {"error", kind}, {"message", msg}}
}

func fail(kind, msg string, code int) {
	final(errorEvent(kind, msg), code)
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

// systemKeys are RocketMQ's own property keys, left out of "properties" in received events.
var systemKeys = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`KEYS TAGS UNIQ_KEY WAIT DELAY RETRY_TOPIC REAL_TOPIC REAL_QID
		TRAN_MSG PGROUP MIN_OFFSET MAX_OFFSET ORIGIN_MESSAGE_ID RECONSUME_TIME MAX_RECONSUME_TIMES
		CONSUME_START_TIME MSG_REGION TRACE_ON TRAN_PREPARED_QUEUE_OFFSET TRANSACTION_CHECK_TIMES
		CHECK_IMMUNITY_TIME_IN_SECONDS CLUSTER DELAY_TIME`) {
		systemKeys[k] = true
	}
}

func userProps(all map[string]string) map[string]string {
	res := map[string]string{}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if systemKeys[k] || strings.HasPrefix(k, "__") {
			continue
		}
		res[k] = all[k]
	}
	return res
}

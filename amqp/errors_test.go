package amqp

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestErrorReplyText(t *testing.T) {
	e := NewError(NotFound, (&QueueDeclare{}).ID(), "no queue '%s' in vhost '%s'", "q", "/")
	if got, want := e.ReplyText(), "NOT_FOUND - no queue 'q' in vhost '/'"; got != want {
		t.Fatalf("ReplyText = %q, want %q", got, want)
	}
	if e.Error() != e.ReplyText() {
		t.Fatalf("Error() = %q differs from ReplyText", e.Error())
	}
	if e.Code != 404 || e.ClassID != ClassQueue || e.MethodID != 10 {
		t.Fatalf("NewError = %+v", e)
	}
	if none := NewError(InternalError, 0, "boom"); none.ClassID != 0 || none.MethodID != 0 {
		t.Fatalf("NewError without a method = %+v", none)
	}
	var target *Error
	if !errors.As(fmt.Errorf("channel 1: %w", e), &target) || target != e {
		t.Fatal("errors.As does not find a wrapped *Error")
	}
}

func TestErrorReplyTextCut(t *testing.T) {
	e := &Error{Code: PreconditionFailed, Text: strings.Repeat("x", 300)}
	if got := e.ReplyText(); len(got) != 255 || !strings.HasPrefix(got, "PRECONDITION_FAILED - xxx") {
		t.Fatalf("ReplyText has %d bytes: %q", len(got), got)
	}
	// The cut must not split a multi-byte character: clients decode the text as UTF-8.
	for pad := range 4 {
		e := &Error{Code: NotFound, Text: strings.Repeat("a", pad) + strings.Repeat("é", 200)}
		got := e.ReplyText()
		if len(got) > 255 || len(got) < 252 || !utf8.ValidString(got) {
			t.Errorf("pad %d: ReplyText has %d bytes, valid UTF-8 %v", pad, len(got), utf8.ValidString(got))
		}
	}
}

func TestErrorHard(t *testing.T) {
	hard := []uint16{320, 402, 501, 502, 503, 504, 505, 506, 530, 540, 541}
	soft := []uint16{311, 312, 313, 403, 404, 405, 406}
	for _, code := range hard {
		if !(&Error{Code: code}).Hard() {
			t.Errorf("code %d (%s) is not hard", code, CodeName(code))
		}
	}
	for _, code := range soft {
		if (&Error{Code: code}).Hard() {
			t.Errorf("code %d (%s) is hard", code, CodeName(code))
		}
	}
	for _, code := range []uint16{0, 200, 500, 999} {
		if (&Error{Code: code}).Hard() {
			t.Errorf("code %d is hard", code)
		}
	}
}

func TestCodeName(t *testing.T) {
	names := map[uint16]string{
		200: "OK", 311: "CONTENT_TOO_LARGE", 312: "NO_ROUTE", 313: "NO_CONSUMERS",
		320: "CONNECTION_FORCED", 402: "INVALID_PATH", 403: "ACCESS_REFUSED", 404: "NOT_FOUND",
		405: "RESOURCE_LOCKED", 406: "PRECONDITION_FAILED", 501: "FRAME_ERROR", 502: "SYNTAX_ERROR",
		503: "COMMAND_INVALID", 504: "CHANNEL_ERROR", 505: "UNEXPECTED_FRAME", 506: "RESOURCE_ERROR",
		530: "NOT_ALLOWED", 540: "NOT_IMPLEMENTED", 541: "INTERNAL_ERROR", 999: "CODE_999",
	}
	for code, want := range names {
		if got := CodeName(code); got != want {
			t.Errorf("CodeName(%d) = %q, want %q", code, got, want)
		}
	}
}

package amqp

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Decoding errors. Each is wrapped with context by the decoder that returns it;
// test with errors.Is.
var (
	// ErrTruncated means the input ended inside a field or frame.
	ErrTruncated = errors.New("amqp: truncated input")
	// ErrTrailingBytes means a method or property list had bytes after its last field.
	ErrTrailingBytes = errors.New("amqp: trailing bytes after arguments")
	// ErrFrameEnd means a frame did not end with the frame-end octet 0xCE.
	ErrFrameEnd = errors.New("amqp: bad frame end")
	// ErrFrameTooLarge means a frame's declared size exceeds the negotiated frame-max.
	ErrFrameTooLarge = errors.New("amqp: frame larger than frame-max")
	// ErrFrameType means a frame had a type that is not method, header, body or heartbeat.
	ErrFrameType = errors.New("amqp: unknown frame type")
	// ErrUnknownMethod means a method frame named a class and method pair the spec does not define.
	ErrUnknownMethod = errors.New("amqp: unknown class or method")
	// ErrFieldType means a field table or array held a value type tag this codec does not know.
	ErrFieldType = errors.New("amqp: unknown field value type")
	// ErrTableDepth means tables or arrays were nested deeper than MaxTableDepth.
	ErrTableDepth = errors.New("amqp: field tables nested too deep")
	// ErrBadHeader means the bytes before the first frame were not an AMQP protocol header.
	ErrBadHeader = errors.New("amqp: bad protocol header")
)

// Error is an AMQP exception: a reply code with the text and the class and method
// that caused it. Whether it closes the channel or the connection follows from the
// code (Hard), and the connection decides.
type Error struct {
	Code     uint16
	Text     string
	ClassID  uint16
	MethodID uint16
}

// NewError returns an exception with a formatted text, raised by the method whose
// combined id (as returned by Method.ID) is method; pass 0 when no method caused it.
func NewError(code uint16, method uint32, format string, args ...any) *Error {
	return &Error{Code: code, Text: fmt.Sprintf(format, args...), ClassID: uint16(method >> 16), MethodID: uint16(method)}
}

// Error renders the exception as RabbitMQ writes reply texts: NAME - text.
func (e *Error) Error() string { return e.ReplyText() }

// ReplyText is the reply-text sent on the wire, e.g. "NOT_FOUND - no queue 'q' in vhost '/'".
// It is cut to the 255 bytes a short string allows, at a character boundary
// because clients decode the text as UTF-8.
func (e *Error) ReplyText() string {
	if e.Text == "" {
		return CodeName(e.Code) // as RabbitMQ answers a crash: "INTERNAL_ERROR"
	}
	s := CodeName(e.Code) + " - " + e.Text
	if len(s) > 255 {
		n := 255
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s
}

// Hard reports whether the exception closes the whole connection rather than one channel.
func (e *Error) Hard() bool { return isHardError(e.Code) }

// CodeName returns the specification's name of a reply code, as RabbitMQ prints it.
func CodeName(code uint16) string {
	switch code {
	case ReplySuccess:
		return "OK"
	case ContentTooLarge:
		return "CONTENT_TOO_LARGE"
	case NoRoute:
		return "NO_ROUTE"
	case NoConsumers:
		return "NO_CONSUMERS"
	case AccessRefused:
		return "ACCESS_REFUSED"
	case NotFound:
		return "NOT_FOUND"
	case ResourceLocked:
		return "RESOURCE_LOCKED"
	case PreconditionFailed:
		return "PRECONDITION_FAILED"
	case ConnectionForced:
		return "CONNECTION_FORCED"
	case InvalidPath:
		return "INVALID_PATH"
	case FrameError:
		return "FRAME_ERROR"
	case SyntaxError:
		return "SYNTAX_ERROR"
	case CommandInvalid:
		return "COMMAND_INVALID"
	case ChannelError:
		return "CHANNEL_ERROR"
	case UnexpectedFrame:
		return "UNEXPECTED_FRAME"
	case ResourceError:
		return "RESOURCE_ERROR"
	case NotAllowed:
		return "NOT_ALLOWED"
	case NotImplemented:
		return "NOT_IMPLEMENTED"
	case InternalError:
		return "INTERNAL_ERROR"
	}
	return fmt.Sprintf("CODE_%d", code)
}

package mgmt

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// rabbitAnswers are requests and RabbitMQ 3.10.8's answers to them, read
// off a node with the federation and shovel plugins, a vhost "gp" that
// guest may use and a user "gp-u". Bodies compare as JSON values.
var rabbitAnswers = []struct {
	method, path, body string
	status             int
	answer             string
}{
	{"PUT", "/api/parameters/federation-upstream/gp/up2", `{"value":{"urix":"amqp://x"}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nUnrecognised terms [{&lt;&lt;\"urix\"&gt;&gt;,&lt;&lt;\"amqp://x\"&gt;&gt;}] in up2\nKey \"uri\" not found in up2\n"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/up3", `{"value":{"uri":"amqp://x","expires":"abc"}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nexpires should be a number, actually was &lt;&lt;\"abc\"&gt;&gt;\n"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/up4", `{"value":{"uri":"amqp://h","queue":null,"max-hops":"1","trust-user-id":"true","ack-mode":"x","ha-policy":1,"message-ttl":1.5}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nha-policy should be binary, actually was 1\nack-mode should be one of [&lt;&lt;\"no-ack\"&gt;&gt;,&lt;&lt;\"on-publish\"&gt;&gt;,&lt;&lt;\"on-confirm\"&gt;&gt;], actually was &lt;&lt;\"x\"&gt;&gt;\ntrust-user-id should be boolean, actually was &lt;&lt;\"true\"&gt;&gt;\nmax-hops should be a number, actually was &lt;&lt;\"1\"&gt;&gt;\nqueue should be binary, actually was null\n"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/up5", `{"value":{"uri":"http://h"}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\n\"http://h\" not a valid URI: {{unexpected_uri_scheme,\"http\"},\"http://h\"}\n"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/up6", `{"value":{"uri":["amqp://h","foo",3]}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\n\"foo\" not a valid URI: {{unable_to_parse_uri,no_scheme},\"foo\"}\n"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/up7", `{"value":{"uri":3}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nuri should be list, actually was 3\n"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/up8", `{"value":{"uri":"amqp://h","unk1":1,"unk2":{"a":"b"}}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nUnrecognised terms [{&lt;&lt;\"unk1\"&gt;&gt;,1},{&lt;&lt;\"unk2\"&gt;&gt;,#{&lt;&lt;\"a\"&gt;&gt; =&gt; &lt;&lt;\"b\"&gt;&gt;}}] in up8\n"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/up9", `{"value":[]}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nKey \"uri\" not found in up9\n"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/up10", `{"value":{"uri":"amqp://h:99999"}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\n\"amqp://h:99999\" not a valid URI: {{port_out_of_range,99999},\"amqp://h:99999\"}\n"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/up11", `{"value":{"uri":"amqp://h/a/b","resource-cleanup-mode":"x","channel-use-mode":3}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nchannel-use-mode should be binary, actually was 3\nresource-cleanup-mode should be one of [&lt;&lt;\"default\"&gt;&gt;,&lt;&lt;\"never\"&gt;&gt;], actually was &lt;&lt;\"x\"&gt;&gt;\n\"amqp://h/a/b\" not a valid URI: {{invalid_vhost,\"a/b\"},\"amqp://h/a/b\"}\n"}`},
	{"PUT", "/api/parameters/federation-upstream-set/gp/set1", `{"value":[{"upstream":"a"},{"upstream":1,"x":2},{"queue":3}]}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nUnrecognised terms [{&lt;&lt;\"x\"&gt;&gt;,2}] in set1\nupstream should be binary, actually was 1\nqueue should be binary, actually was 3\nKey \"upstream\" not found in set1\n"}`},
	{"PUT", "/api/parameters/nosuch/gp/n", `{"value":{"a":1}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\ncomponent nosuch not found\n"}`},
	{"PUT", "/api/parameters/shovel/gp/s2", `{"value":{"src-uri":"amqp://"}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nMust specify 'src-exchange' or 'src-queue'\nKey \"dest-uri\" not found in s2\n"}`},
	{"PUT", "/api/parameters/shovel/gp/s3", `{"value":{"src-uri":"amqp:///nosuch","src-queue":"a","dest-uri":"amqp://","dest-queue":"b","src-queue-args":{"x-foo":1,"x-expires":"a"}}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nUnrecognised terms [{&lt;&lt;\"x-foo\"&gt;&gt;,1}] in src-queue-args\nuser \"guest\" may not connect to vhost \"nosuch\"\n"}`},
	{"PUT", "/api/parameters/shovel/gp/s4", `{"value":{"src-uri":"amqp://h","src-queue":"a","src-exchange":"x","dest-uri":"amqp://h","dest-queue":"b","dest-exchange":"y","ack-mode":"no-ack","delete-after":5}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nCannot specify 'src-exchange' and 'src-queue'\nCannot specify 'no-ack' and numerical 'delete-after'\nCannot specify 'dest-exchange' and 'dest-queue'\n"}`},
	{"PUT", "/api/parameters/shovel/gp/s6", `{"value":{"src-protocol":"amqp10","dest-protocol":"amqp10","src-uri":"amqp://h","dest-uri":"amqp://h","dest-properties":{"a":1}}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\na should be binary, actually was 1\nKey \"dest-address\" not found in s6\nKey \"src-address\" not found in s6\n"}`},
	{"PUT", "/api/parameters/shovel/gp/s7", `{"value":{"src-uri":"amqp://h","src-queue":"a","dest-uri":"amqp://h","dest-queue":"` + strings.Repeat("q", 256) + `"}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\ndest-queue should be less than 255 bytes, actually was 256\n"}`},
	{"PUT", "/api/parameters/vhost-limits/gp/limits", `{"value":{"max-queues":5,"max-connections":"a","foo":1}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nUnrecognised terms [{&lt;&lt;\"foo\"&gt;&gt;,1}] in limits\nmax-connections should be a number, actually was &lt;&lt;\"a\"&gt;&gt;\n"}`},
	{"PUT", "/api/vhost-limits/gp/nosuch", `{"value":1}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nUnrecognised terms [{<<\"nosuch\">>,1}] in limits\n"}`},
	{"PUT", "/api/vhost-limits/gp/max-queues", `{"value":1.5}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nmax-queues should be a number, actually was 1.5\n"}`},
	{"PUT", "/api/vhost-limits/gp/max-queues", `{"valu":1}`, 400, `{"error":"bad_request","reason":"[{key_missing,value}]"}`},
	{"PUT", "/api/vhost-limits/nosuchvh/max-queues", `{"value":1}`, 404, `{"error":"not_found","reason":"vhost_not_found"}`},
	{"GET", "/api/vhost-limits/nosuchvh", "", 404, `{"error":"Object Not Found","reason":"Not Found"}`},
	{"PUT", "/api/user-limits/gp-u/nosuch", `{"value":1}`, 400, `{"error":"bad_request","reason":"Unrecognised terms [{<<\"nosuch\">>,1}] in user-limits"}`},
	{"PUT", "/api/user-limits/gp-u/max-channels", `{"value":"x"}`, 400, `{"error":"bad_request","reason":"max-channels should be a number, actually was <<\"x\">>"}`},
	{"PUT", "/api/user-limits/gp-u/max-channels", `{"valu":1}`, 400, `{"error":"bad_request","reason":"[{key_missing,value}]"}`},
	{"PUT", "/api/user-limits/nosuchuser/max-channels", `{"value":1}`, 400, `{"error":"bad_request","reason":["no_such_user","nosuchuser"]}`},
	{"GET", "/api/user-limits/nosuchuser", "", 404, `{"error":"Object Not Found","reason":"Not Found"}`},
	{"GET", "/api/parameters/federation-upstream/gp/missing", "", 404, `{"error":"Object Not Found","reason":"Not Found"}`},
	{"GET", "/api/parameters/federation-upstream/nosuchvh", "", 404, `{"error":"Object Not Found","reason":"Not Found"}`},
	{"PUT", "/api/parameters/federation-upstream/nosuchvh/x", `{"value":{"uri":"amqp://"}}`, 404, `{"error":"not_found","reason":"vhost_not_found"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/x", "notjson", 400, `{"error":"bad_request","reason":"not_json"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/x", `{"valu":1}`, 400, `{"error":"bad_request","reason":"[{key_missing,value}]"}`},
	{"DELETE", "/api/parameters/federation-upstream/gp/missing", "", 404, `{"error":"Object Not Found","reason":"Not Found"}`},
	{"GET", "/api/global-parameters/missing", "", 404, `{"error":"Object Not Found","reason":"Not Found"}`},
	{"DELETE", "/api/global-parameters/missing", "", 404, `{"error":"Object Not Found","reason":"Not Found"}`},
	{"PUT", "/api/global-parameters/x", `{"valu":1}`, 400, `{"error":"bad_request","reason":"[{key_missing,value}]"}`},
	// Terms printed over several lines, as ~p breaks them at 80 columns.
	{"PUT", "/api/parameters/federation-upstream/gp/w1", `{"value":{"uri":"amqp://h","exchange":{"a":1,"b":[1,"x",true,null,{"c":2.5}]}}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nexchange should be binary, actually was #{&lt;&lt;\"a\"&gt;&gt; =&gt; 1,\n                                          &lt;&lt;\"b\"&gt;&gt; =&gt;\n                                              [1,&lt;&lt;\"x\"&gt;&gt;,true,null,\n                                               #{&lt;&lt;\"c\"&gt;&gt; =&gt; 2.5}]}\n"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/w2", `{"value":{"uri":"amqp://h","exchange":[1,"x",true,null,{"c":2.5},[]]}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nexchange should be binary, actually was [1,&lt;&lt;\"x\"&gt;&gt;,true,null,\n                                         #{&lt;&lt;\"c\"&gt;&gt; =&gt; 2.5},\n                                         []]\n"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/w3", `{"value":{"uri":"amqp://h","exchange":{"a":1,"b":[true,"x"]}}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nexchange should be binary, actually was #{&lt;&lt;\"a\"&gt;&gt; =&gt; 1,\n                                          &lt;&lt;\"b\"&gt;&gt; =&gt; [true,&lt;&lt;\"x\"&gt;&gt;]}\n"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/w4", `{"value":{"uri":"amqp://h","queue":["aaaaaaaaaaaaaaaaaaaa","bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","cccccccccccccccccccccccc","dddddddddddddddddddddddd","eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"]}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nqueue should be binary, actually was [&lt;&lt;\"aaaaaaaaaaaaaaaaaaaa\"&gt;&gt;,\n                                      &lt;&lt;\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"&gt;&gt;,\n                                      &lt;&lt;\"cccccccccccccccccccccccc\"&gt;&gt;,\n                                      &lt;&lt;\"dddddddddddddddddddddddd\"&gt;&gt;,\n                                      &lt;&lt;\"eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee\"&gt;&gt;]\n"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/w5", `{"value":{"uri":"amqp://h","queue":{"k1":{"k2":{"k3":[1,2,3,{"k4":"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"}]}},"zz":[{"a":1},{"b":2},3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25]}}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nqueue should be binary, actually was #{&lt;&lt;\"k1\"&gt;&gt; =&gt;\n                                           #{&lt;&lt;\"k2\"&gt;&gt; =&gt;\n                                                 #{&lt;&lt;\"k3\"&gt;&gt; =&gt;\n                                                       [1,2,3,\n                                                        #{&lt;&lt;\"k4\"&gt;&gt; =&gt;\n                                                              &lt;&lt;\"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv\"&gt;&gt;}]}},\n                                       &lt;&lt;\"zz\"&gt;&gt; =&gt;\n                                           [#{&lt;&lt;\"a\"&gt;&gt; =&gt; 1},\n                                            #{&lt;&lt;\"b\"&gt;&gt; =&gt; 2},\n                                            3,4,5,6,7,8,9,10,11,12,13,14,15,\n                                            16,17,18,19,20,21,22,23,24,25]}\n"}`},
	{"PUT", "/api/parameters/federation-upstream/gp/w6", `{"value":{"uri":"amqp://h","unknown-key-with-a-long-name":{"nested":["a","b",{"c":"d"}],"other":12345678901234567890},"second-unknown":[1.5,2.5,3.5]}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nUnrecognised terms [{&lt;&lt;\"second-unknown\"&gt;&gt;,[1.5,2.5,3.5]},\n                    {&lt;&lt;\"unknown-key-with-a-long-name\"&gt;&gt;,\n                     #{&lt;&lt;\"nested\"&gt;&gt; =&gt; [&lt;&lt;\"a\"&gt;&gt;,&lt;&lt;\"b\"&gt;&gt;,#{&lt;&lt;\"c\"&gt;&gt; =&gt; &lt;&lt;\"d\"&gt;&gt;}],\n                       &lt;&lt;\"other\"&gt;&gt; =&gt; 12345678901234567890}}] in w6\n"}`},
	{"PUT", "/api/parameters/shovel/gp/w7", `{"value":{"src-uri":"amqp://h","src-queue":"a","dest-uri":"amqp://h","dest-publish-properties":{"delivery_mode":[{"xxxxxxxxxxxxxxxxxxxx":"yyyyyyyyyyyyyyyyyyyyyyyyyyyy"},{"zzzzzzzzzzzzzzzzz":true}]}}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\ndelivery_mode should be a number, actually was [#{&lt;&lt;\"xxxxxxxxxxxxxxxxxxxx\"&gt;&gt; =&gt;\n                                                      &lt;&lt;\"yyyyyyyyyyyyyyyyyyyyyyyyyyyy\"&gt;&gt;},\n                                                #{&lt;&lt;\"zzzzzzzzzzzzzzzzz\"&gt;&gt; =&gt;\n                                                      true}]\n"}`},
	{"PUT", "/api/vhost-limits/gp/max-queues", `{"value":[1,{"a":null,"b":false}]}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nmax-queues should be a number, actually was [1,\n                                             #{<<\"a\">> => null,\n                                               <<\"b\">> => false}]\n"}`},
	{"PUT", "/api/vhost-limits/gp/max-queues", `{"value":1000.0}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nmax-queues should be a number, actually was 1.0e3\n"}`},
	{"PUT", "/api/vhost-limits/gp/max-queues", `{"value":100.0}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nmax-queues should be a number, actually was 100.0\n"}`},
	{"PUT", "/api/vhost-limits/gp/max-queues", `{"value":0.001}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nmax-queues should be a number, actually was 0.001\n"}`},
	{"PUT", "/api/vhost-limits/gp/max-queues", `{"value":1e-05}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nmax-queues should be a number, actually was 1.0e-5\n"}`},
	{"PUT", "/api/vhost-limits/gp/max-queues", `{"value":123456789.0}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nmax-queues should be a number, actually was 123456789.0\n"}`},
	{"PUT", "/api/vhost-limits/gp/max-queues", `{"value":-2.5e-07}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nmax-queues should be a number, actually was -2.5e-7\n"}`},
	{"PUT", "/api/vhost-limits/gp/max-queues", `{"value":"a\"b\\c\nd\te"}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nmax-queues should be a number, actually was <<\"a\\\"b\\\\c\\nd\\te\">>\n"}`},
	{"PUT", "/api/vhost-limits/gp/max-queues", `{"value":"é"}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nmax-queues should be a number, actually was <<\"é\">>\n"}`},
	{"PUT", "/api/vhost-limits/gp/max-queues", `{"value":"\u0001x"}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nmax-queues should be a number, actually was <<1,120>>\n"}`},
	{"PUT", "/api/vhost-limits/gp/max-queues", `{"value":true}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nmax-queues should be a number, actually was true\n"}`},
	{"PUT", "/api/vhost-limits/gp/max-queues", `{"value":{}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nmax-queues should be a number, actually was #{}\n"}`},
	// A list where an object belongs is a proplist of leftovers.
	{"PUT", "/api/parameters/federation-upstream/gp/l1", `{"value":[1,"a"]}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nUnrecognised terms [1,&lt;&lt;\"a\"&gt;&gt;] in l1\nKey \"uri\" not found in l1\n"}`},
	{"PUT", "/api/parameters/shovel/gp/l2", `{"value":{"src-uri":"amqp://h","src-queue":"a","dest-uri":"amqp://h","src-queue-args":[1]}}`, 400, `{"error":"bad_request","reason":"Validation failed\n\nUnrecognised terms [1] in src-queue-args\n"}`},
	// An integer beyond 64 bits is an Erlang bignum: a valid limit, shown as sent.
	{"PUT", "/api/vhost-limits/gp/max-queues", `{"value":12345678901234567890123}`, 204, ``},
	{"GET", "/api/vhost-limits/gp", "", 200, `[{"vhost":"gp","value":{"max-queues":12345678901234567890123}}]`},
}

// decodeJSONExact decodes a body with numbers as their text, so 1 and 1.0
// or two large integers differing in their last digits compare unequal.
func decodeJSONExact(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// TestMgmtParametersAnswerAsRabbitMQ sends each request of rabbitAnswers
// and expects RabbitMQ's status and body: validation texts of every
// component (reverse constraint order, Erlang terms, HTML-escaped on the
// parameter endpoints and not on the limit ones) and the 400s and 404s.
func TestMgmtParametersAnswerAsRabbitMQ(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/vhosts/gp", nil), 201, "vhost gp")
	e.must(e.put("/api/permissions/gp/guest", map[string]any{"configure": ".*", "write": ".*", "read": ".*"}), 201, "guest on gp")
	e.must(e.put("/api/users/gp-u", map[string]any{"password": "p", "tags": ""}), 201, "user gp-u")
	for _, c := range rabbitAnswers {
		var body any
		if c.body != "" {
			body = c.body
		}
		r := e.do(c.method, c.path, body)
		if r.status != c.status {
			t.Errorf("%s %s: status %d, want %d; body %s", c.method, c.path, r.status, c.status, r.body)
			continue
		}
		if c.answer == "" {
			continue
		}
		got, err := decodeJSONExact(r.body)
		if err != nil {
			t.Errorf("%s %s: body %q: %v", c.method, c.path, r.body, err)
			continue
		}
		want, err := decodeJSONExact([]byte(c.answer))
		if err != nil {
			t.Fatalf("bad recorded answer %q: %v", c.answer, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s %s:\n got %s\nwant %s", c.method, c.path, strings.TrimSpace(string(r.body)), c.answer)
		}
	}
}
